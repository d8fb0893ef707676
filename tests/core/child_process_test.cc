// launch/child_process.h: the environment a supervisor passes on, and a child's signals.
#include "core/launch/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include <gtest/gtest.h>

namespace headroom::launch {
namespace {

bool Has(const std::vector<std::string>& env, const std::string& entry) {
  return std::find(env.begin(), env.end(), entry) != env.end();
}

TEST(ChildProcessTest, EnvironmentWithoutDropsExactlyTheNamedVariables) {
  setenv("HEADROOM_CHILD_TEST", "1", 1);
  setenv("HEADROOM_CHILD_TEST_LONGER", "a=b", 1);
  const std::vector<std::string> env = EnvironmentWithout({"HEADROOM_CHILD_TEST"});
  EXPECT_FALSE(Has(env, "HEADROOM_CHILD_TEST=1"));
  // A name that merely starts with a dropped one is another variable; a value keeps its '='.
  EXPECT_TRUE(Has(env, "HEADROOM_CHILD_TEST_LONGER=a=b"));
  EXPECT_TRUE(Has(env, std::string("PATH=") + std::getenv("PATH")));
  unsetenv("HEADROOM_CHILD_TEST");
  unsetenv("HEADROOM_CHILD_TEST_LONGER");
}

// Runs `script` with /bin/sh in a supervised child of this process and returns its wait status.
int RunSupervised(const std::string& script) {
  const ExecImage image({"/bin/sh", "-c", script}, EnvironmentWithout({}));
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    BecomeSupervisedChild(parent);
    image.ExecOrExit("child_process_test: cannot exec /bin/sh\n");
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(ChildProcessTest, AChildGetsDefaultSignalsWhateverItsSupervisorSet) {
  // A supervisor ignores SIGTERM and blocks SIGINT while it forwards them; both are
  // inherited across exec, and a shell can not undo an ignored signal.
  struct sigaction old_term {};
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGTERM, &ignore, &old_term);
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigprocmask(SIG_BLOCK, &block, &old_mask);

  const int term = RunSupervised("kill -TERM $$; sleep 3");
  const int interrupt = RunSupervised("kill -INT $$; sleep 3");
  // Its own process group: a terminal's Ctrl-C goes to the supervisor alone.
  const int group = RunSupervised("set -- $(cat /proc/$$/stat); [ \"$5\" = \"$$\" ]");

  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  ASSERT_TRUE(WIFSIGNALED(term)) << "exit status " << WEXITSTATUS(term);
  EXPECT_EQ(WTERMSIG(term), SIGTERM);
  ASSERT_TRUE(WIFSIGNALED(interrupt)) << "exit status " << WEXITSTATUS(interrupt);
  EXPECT_EQ(WTERMSIG(interrupt), SIGINT);
  ASSERT_TRUE(WIFEXITED(group));
  EXPECT_EQ(WEXITSTATUS(group), 0);
}

TEST(ChildProcessTest, AProgramThatCannotBeExecutedExits127) {
  const ExecImage image({"/nonexistent/headroom-child"}, {});
  const pid_t pid = fork();
  if (pid == 0) {
    // Keep the test's output clean: the line goes to /dev/null.
    dup2(open("/dev/null", O_WRONLY), STDERR_FILENO);
    image.ExecOrExit("child_process_test: cannot exec\n");
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 127);
}

// RunToCompletion: both streams apart, the exit status, arguments as they are (no shell),
// output beyond the bound dropped without blocking the child, and what cannot run.
TEST(ChildProcessTest, RunToCompletionCapturesBothStreamsAndTheExitCode) {
  const CompletedProcess done =
      RunToCompletion({"/bin/sh", "-c", "printf '%s' \"$0\"; echo oops >&2; exit 3", "a b; $(false)"});
  EXPECT_EQ(done.exit_code, 3);
  EXPECT_EQ(done.out, "a b; $(false)");
  EXPECT_EQ(done.err, "oops\n");
  // 4 MiB of output against a 1 KiB bound: the child finishes, the rest is dropped.
  const CompletedProcess chatty = RunToCompletion({"/bin/sh", "-c", "head -c 4194304 /dev/zero; exit 0"}, 1024);
  EXPECT_EQ(chatty.exit_code, 0);
  EXPECT_EQ(chatty.out.size(), 1024u);
  const CompletedProcess killed = RunToCompletion({"/bin/sh", "-c", "kill -9 $$"});
  EXPECT_EQ(killed.exit_code, 128 + SIGKILL);
  const CompletedProcess missing = RunToCompletion({"/nonexistent/program"});
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_NE(missing.err.find("/nonexistent/program"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace headroom::launch
