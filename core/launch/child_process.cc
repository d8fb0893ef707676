#include "core/launch/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "core/protocol/stop_signals.h"

extern char** environ;

namespace headroom::launch {

std::vector<std::string> EnvironmentWithout(const std::vector<std::string>& replaced) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const std::string name = kv.substr(0, kv.find('='));
    if (std::find(replaced.begin(), replaced.end(), name) == replaced.end()) env.push_back(kv);
  }
  return env;
}

ExecImage::ExecImage(std::vector<std::string> args, std::vector<std::string> env)
    : args_(std::move(args)), env_(std::move(env)) {
  for (std::string& a : args_) argv_.push_back(a.data());
  argv_.push_back(nullptr);
  for (std::string& e : env_) envp_.push_back(e.data());
  envp_.push_back(nullptr);
}

void ExecImage::ExecOrExit(const char* failure_line) const {
  if (!args_.empty()) execve(argv_[0], argv_.data(), envp_.data());
  (void)!write(STDERR_FILENO, failure_line, std::strlen(failure_line));
  _exit(127);
}

namespace {

// BecomeSupervisedChild with `blocked` as the signal mask.
void BecomeSupervised(pid_t parent, const sigset_t& blocked) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The supervisor died before the line above took effect: nobody would kill us.
  if (getppid() != parent) _exit(127);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  sigprocmask(SIG_SETMASK, &blocked, nullptr);
}

}  // namespace

void BecomeSupervisedChild(pid_t parent) {
  sigset_t none;
  sigemptyset(&none);
  BecomeSupervised(parent, none);
}

void BecomeSupervisedWorker(pid_t parent) { BecomeSupervised(parent, protocol::StopSignalSet()); }

StopSignalsBlocked::StopSignalsBlocked() {
  const sigset_t stops = protocol::StopSignalSet();
  pthread_sigmask(SIG_BLOCK, &stops, &previous_);
}

StopSignalsBlocked::~StopSignalsBlocked() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }

namespace {

[[noreturn]] void ThrowErrno(const char* what) { throw std::system_error(errno, std::generic_category(), what); }

}  // namespace

CompletedProcess RunToCompletion(const std::vector<std::string>& args, size_t max_output_bytes) {
  const ExecImage image(args, EnvironmentWithout({}));
  const std::string failure = "cannot execute " + (args.empty() ? std::string("(nothing)") : args[0]) + "\n";
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) ThrowErrno("pipe");
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int saved = errno;
    close(out_pipe[0]);
    close(out_pipe[1]);
    errno = saved;
    ThrowErrno("pipe");
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int saved = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
    errno = saved;
    ThrowErrno("fork");
  }
  if (pid == 0) {
    BecomeSupervisedChild(parent);
    const int null_in = open("/dev/null", O_RDONLY);
    if (null_in >= 0) dup2(null_in, STDIN_FILENO);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    image.ExecOrExit(failure.c_str());
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  CompletedProcess done;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&done.out, &done.err};
  int open_streams = 2;
  char buffer[65536];
  while (open_streams > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;  // poll skips negative descriptors
        --open_streams;
        continue;
      }
      std::string& sink = *sinks[i];
      sink.append(buffer, std::min(static_cast<size_t>(n), max_output_bytes - std::min(max_output_bytes, sink.size())));
    }
  }
  for (const pollfd& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) ThrowErrno("waitpid");
  }
  done.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return done;
}

}  // namespace headroom::launch
