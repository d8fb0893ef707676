// Sweeping the memory cgroups of killed runs: only ours (the local runtime's names), only
// those whose supervisor is dead, only empty ones. Plain directories behave as cgroups do
// here: rmdir refuses one with entries.
#include "local/stale_cgroups.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/local/local_test_support.h"

namespace headroom::local {
namespace {

namespace fs = std::filesystem;

pid_t DeadPid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  return child;
}

TEST(StaleCgroups, RemovesOnlyEmptyOnesOfDeadRuns) {
  testing::TempDir dir;
  const std::string dead = std::to_string(DeadPid());
  const std::string alive = std::to_string(getpid());
  const std::string base = dir.path() + "/";
  for (const std::string name : {"headroom-my-job-" + dead + "-g1-r0", "headroom-my-job-" + dead + "-g2-r1",
                                 "headroom-my-job-" + alive + "-g1-r0", "headroom-busy-" + dead + "-g1-r0",
                                 "other-" + dead + "-g1-r0", "headroom-" + dead}) {
    fs::create_directories(base + name);
  }
  std::ofstream(base + "headroom-busy-" + dead + "-g1-r0/cgroup.procs") << "1\n";

  EXPECT_EQ(RemoveStaleCgroups(dir.path()), 2);
  EXPECT_FALSE(fs::exists(base + "headroom-my-job-" + dead + "-g1-r0"));
  EXPECT_FALSE(fs::exists(base + "headroom-my-job-" + dead + "-g2-r1"));
  EXPECT_TRUE(fs::exists(base + "headroom-my-job-" + alive + "-g1-r0")) << "a live run's cgroup";
  EXPECT_TRUE(fs::exists(base + "headroom-busy-" + dead + "-g1-r0")) << "not empty";
  EXPECT_TRUE(fs::exists(base + "other-" + dead + "-g1-r0")) << "not ours";
  EXPECT_TRUE(fs::exists(base + "headroom-" + dead)) << "not our naming";
}

}  // namespace
}  // namespace headroom::local
