// MemoryCgroup, live: a child process in a real memory cgroup on this machine, read from
// outside, then pushed past its limit until the kernel OOM-kills it. Skipped (with the
// reason) where no writable memory cgroup exists: not root, or no memory controller.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "core/memory/cgroup.h"
#include "core/memory/host_memory.h"

namespace headroom::memory {
namespace {

constexpr int64_t kMiB = 1 << 20;

// Child: join the cgroup (the parent passes the path), touch `first` MiB, signal the parent
// over `ready`, wait for a byte on `go`, then touch `second` MiB more.
[[noreturn]] void Child(const std::string& procs, int ready, int go, int first_mib, int second_mib) {
  alarm(10);  // never outlive a parent whose assertion failed before it said "go"
  FILE* f = std::fopen(procs.c_str(), "w");
  if (f == nullptr || std::fprintf(f, "%d", getpid()) < 0 || std::fclose(f) != 0) _exit(3);
  auto touch = [](int mib) {
    // volatile: the stores must happen, or the compiler may drop an unread buffer.
    volatile char* p = static_cast<volatile char*>(std::malloc(static_cast<size_t>(mib) * kMiB));
    if (p == nullptr) _exit(4);
    for (int64_t i = 0; i < mib * kMiB; i += 4096) p[i] = 1;
    return p;
  };
  volatile char* a = touch(first_mib);
  char c = 1;
  if (write(ready, &c, 1) != 1) _exit(5);
  if (read(go, &c, 1) != 1) _exit(6);
  volatile char* b = touch(second_mib);
  (void)a;
  (void)b;
  _exit(0);
}

TEST(MemoryCgroupTest, ChildIsMeasuredFromOutsideAndOomKilledAtTheLimit) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to create memory cgroups";
  const std::string why = MemoryCgroup::UnsupportedReason();
  if (!why.empty()) GTEST_SKIP() << "no writable memory cgroup: " << why;

  const std::string name = "headroom-test-" + std::to_string(getpid());
  MemoryCgroup group = MemoryCgroup::Create(name, 64 * kMiB);
  CgroupMemory idle = group.Read();
  EXPECT_EQ(idle.limit_bytes, 64 * kMiB);
  EXPECT_EQ(idle.oom_kill_count, 0);

  int ready[2], go[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(go), 0);
  const std::string procs = group.dir() + "/cgroup.procs";
  pid_t pid = fork();
  ASSERT_GE(pid, 0) << std::strerror(errno);
  if (pid == 0) Child(procs, ready[1], go[0], 24, 96);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1) << "child did not report";

  // From outside: the 24 MiB the child touched is charged to its cgroup.
  CgroupMemory running = group.Read();
  EXPECT_GE(running.usage_bytes, 24 * kMiB);
  EXPECT_GE(running.working_set_bytes, 20 * kMiB);
  EXPECT_LE(running.working_set_bytes, 64 * kMiB);
  EXPECT_GE(running.peak_bytes, running.usage_bytes);

  // Past the limit: the kernel kills it, and the cgroup counts the kill.
  ASSERT_EQ(write(go[1], &c, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status) << " instead of being killed";
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_EQ(group.OomKillCount(), 1);

  for (int fd : {ready[0], ready[1], go[0], go[1]}) close(fd);
  // Empty now: the group can go (the kernel may take a moment to drop the dead task).
  bool destroyed = false;
  for (int i = 0; i < 100 && !destroyed; ++i) {
    destroyed = group.Destroy();
    if (!destroyed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(destroyed) << group.dir();
}

// What a worker sees from inside its cgroup: HostMemoryProbe finds the group through
// /proc/self/cgroup and mountinfo, reports its limit, and may reset the v1 peak it owns.
TEST(MemoryCgroupTest, ProbeInsideTheCgroupFindsItsLimit) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to create memory cgroups";
  const std::string why = MemoryCgroup::UnsupportedReason();
  if (!why.empty()) GTEST_SKIP() << "no writable memory cgroup: " << why;

  MemoryCgroup group = MemoryCgroup::Create("headroom-test-probe-" + std::to_string(getpid()), 96 * kMiB);
  struct Report {
    char source[16];
    int64_t limit, working_set, peak_before, peak_after;
    bool reset;
  };
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    FILE* f = std::fopen((group.dir() + "/cgroup.procs").c_str(), "w");
    if (f == nullptr || std::fprintf(f, "%d", getpid()) < 0 || std::fclose(f) != 0) _exit(3);
    volatile char* block = static_cast<volatile char*>(std::malloc(32 * kMiB));
    for (int64_t i = 0; i < 32 * kMiB; i += 4096) block[i] = 1;
    std::free(const_cast<char*>(block));  // freed: usage falls, the kernel peak stays
    HostMemoryProbe probe;
    HostMemorySample s = probe.Read();
    Report r{};
    std::snprintf(r.source, sizeof r.source, "%s", s.source.c_str());
    r.limit = s.limit_bytes;
    r.working_set = s.working_set_bytes;
    r.peak_before = s.peak_bytes;
    r.reset = probe.ResetPeak(/*owns_cgroup=*/true);
    r.peak_after = probe.Read().peak_bytes;
    if (write(fds[1], &r, sizeof r) != sizeof r) _exit(4);
    _exit(0);
  }
  Report r{};
  ASSERT_EQ(read(fds[0], &r, sizeof r), static_cast<ssize_t>(sizeof r));
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(fds[0]);
  close(fds[1]);
  EXPECT_STREQ(r.source, group.version() == CgroupVersion::kV1 ? "cgroup-v1" : "cgroup-v2");
  EXPECT_EQ(r.limit, 96 * kMiB);
  EXPECT_GT(r.working_set, 0);
  EXPECT_GE(r.peak_before, 32 * kMiB);
  if (group.version() == CgroupVersion::kV1) {
    EXPECT_TRUE(r.reset);
    EXPECT_LT(r.peak_after, r.peak_before) << "the reset peak restarts from current usage";
  }
  for (int i = 0; i < 100 && !group.Destroy(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(group.dir().empty()) << "cgroup left behind";
}

TEST(MemoryCgroupTest, DestroyRefusesWhileAProcessIsInside) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to create memory cgroups";
  const std::string why = MemoryCgroup::UnsupportedReason();
  if (!why.empty()) GTEST_SKIP() << "no writable memory cgroup: " << why;

  MemoryCgroup group = MemoryCgroup::Create("headroom-test-busy-" + std::to_string(getpid()), 32 * kMiB);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(10);  // gone even if the parent fails before killing it
    pause();
    _exit(0);
  }
  group.AddProcess(pid);
  EXPECT_FALSE(group.Destroy()) << "rmdir must fail while a task is in the group";
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  bool destroyed = false;
  for (int i = 0; i < 100 && !destroyed; ++i) {
    destroyed = group.Destroy();
    if (!destroyed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(destroyed);
}

TEST(MemoryCgroupTest, BadArgumentsAreRejectedWithTheReason) {
  if (geteuid() != 0 || !MemoryCgroup::Supported()) GTEST_SKIP() << "no writable memory cgroup here";
  EXPECT_THROW(MemoryCgroup::Create("../escape", 1 << 20), std::invalid_argument);
  EXPECT_THROW(MemoryCgroup::Create("", 1 << 20), std::invalid_argument);
  try {
    MemoryCgroup::Create("headroom-test-zero-" + std::to_string(getpid()), 0);
    FAIL() << "a zero limit must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("limit"), std::string::npos);
  }
}

TEST(MemoryCgroupTest, UnsupportedReasonExplainsAMissingHierarchy) {
  const std::string fixture = std::string(HEADROOM_SOURCE_DIR) + "/tests/core/testdata/cgroup/proc-only";
  EXPECT_NE(MemoryCgroup::UnsupportedReason(fixture).find("memory controller"), std::string::npos);
}

}  // namespace
}  // namespace headroom::memory
