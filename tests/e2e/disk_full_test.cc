// `headroom run` with its work directory on a real filesystem that fills up (a tmpfs
// mounted by the test; it skips, saying why, where it cannot mount one): the example text
// job at 4 steps, a checkpoint every step, on a tmpfs sized to hold the steps so far and
// one more checkpoint, so the save of step 3 finds the disk full. The worker tries the save
// once more, finds the disk as full, and the run ends Failed at once (no restart
// retraining the interval) with one last line naming the filesystem and the checkpoint kept; its summary and
// memory files are whole; nothing half-written is left; and once space returns the same
// command resumes from the checkpoint kept and finishes.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/checkpoint/checkpoint_layout.h"
#include "tests/e2e/example_job_runs.h"
#include "tests/helpers/temp_dir.h"

namespace headroom::e2e {
namespace {

namespace fs = std::filesystem;

uint64_t BytesUnder(const fs::path& dir) {
  uint64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) total += e.is_regular_file() ? e.file_size() : 0;
  return total;
}

uint64_t UsedBytes(const std::string& path) {
  struct statvfs vfs {};
  EXPECT_EQ(statvfs(path.c_str(), &vfs), 0) << std::strerror(errno);
  return static_cast<uint64_t>(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize;
}

// A tmpfs at `path` for the test's length.
class Tmpfs {
 public:
  explicit Tmpfs(std::string path) : path_(std::move(path)) {
    fs::create_directories(path_);
    if (mount("tmpfs", path_.c_str(), "tmpfs", 0, "size=64m") != 0) error_ = std::strerror(errno);
  }
  ~Tmpfs() {
    if (error_.empty()) umount2(path_.c_str(), MNT_DETACH);
  }
  const std::string& error() const { return error_; }
  void Resize(uint64_t bytes) {
    const std::string options = "size=" + std::to_string(bytes);
    ASSERT_EQ(mount("tmpfs", path_.c_str(), "tmpfs", MS_REMOUNT, options.c_str()), 0) << std::strerror(errno);
  }

 private:
  std::string path_;
  std::string error_;
};

TEST(DiskFullE2E, TheRunEndsNamingTheDiskKeepsItsRecordAndResumesOnceSpaceReturns) {
  if (const std::string why = Unrunnable(); !why.empty()) GTEST_SKIP() << why;
  headroom::testing::TempDir dir("headroom-disk-full");
  const std::string workdir = dir.path() + "/run";
  Tmpfs disk(workdir);
  if (!disk.error().empty()) GTEST_SKIP() << "cannot mount a tmpfs at " << workdir << ": " << disk.error();
  const std::string job = WriteJob(dir.path(), 4, Train());
  const std::string checkpoints = workdir + "/checkpoints";

  // How large one checkpoint is: a worker alone saves step 1 and is killed saving step 2.
  fs::create_directories(checkpoints);
  const RunResult sizing =
      RunCommand(kBin + "/headroom-worker --job " + job + " --checkpoint-dir " + checkpoints + " --metrics-port 0",
                 dir.path() + "/sizing.out", "HEADROOM_KILL_AT=checkpoint_tensors_written@2");
  ASSERT_EQ(sizing.exit_code, 128 + 9) << sizing.output;
  const uint64_t step_bytes = BytesUnder(checkpoints + "/step-000001");
  fs::remove_all(checkpoints + "/step-000002.partial");
  // Room for step 2 and half of step 3: step 2 fits, step 3 does not (the oldest step is
  // pruned only after the new one is in place).
  disk.Resize(UsedBytes(workdir) + step_bytes + step_bytes / 2);

  const RunResult full = HeadroomRun(job, workdir, "--summary " + dir.path() + "/summary-copy.json");
  EXPECT_EQ(full.exit_code, 1) << full.output;
  const size_t fail = full.output.find("fail: ");
  ASSERT_NE(fail, std::string::npos) << full.output;
  EXPECT_NE(full.output.substr(fail, full.output.find('\n', fail) - fail).find(std::strerror(ENOSPC)),
            std::string::npos)
      << "the failure line does not say the disk is full\n"
      << full.output;
  std::string last = full.output.substr(0, full.output.find_last_not_of('\n') + 1);
  last = last.substr(last.find_last_of('\n') + 1);
  EXPECT_EQ(last.rfind("headroom: disk full: " + workdir + " is on the filesystem at " + workdir + " with ", 0), 0u)
      << full.output;
  EXPECT_NE(last.find("kept: the checkpoint at step 2 in " + checkpoints), std::string::npos) << full.output;
  for (const char* record : {"summary.json", "memory.csv", "memory.svg"}) {
    EXPECT_GT(fs::file_size(workdir + "/" + record), 0u) << record << "\n" << full.output;
  }
  EXPECT_EQ(PartialEntries(checkpoints), std::vector<std::string>{}) << full.output;
  EXPECT_EQ(checkpoint::CompleteSteps(checkpoints), (std::vector<int64_t>{1, 2}));
  // The refused save was tried once more in the worker, then the job stopped: no restart
  // retrained the interval only to fail the same way.
  EXPECT_NE(ReadAll(workdir + "/gen-0001/rank-0.out").find("trying once more"), std::string::npos) << full.output;
  EXPECT_FALSE(fs::exists(workdir + "/gen-0002")) << "a restart retrained the interval\n" << full.output;
  EXPECT_NE(ReadAll(dir.path() + "/summary-copy.json").find("\"restarts\": 0"), std::string::npos) << full.output;

  disk.Resize(64 << 20);  // space returns
  const RunResult rerun = HeadroomRun(job, workdir);
  ASSERT_EQ(rerun.exit_code, 0) << rerun.output;
  EXPECT_NE(rerun.output.find("resuming from the checkpoint at step 2"), std::string::npos) << rerun.output;
  EXPECT_EQ(LoggedSteps(workdir + "/gen-0001/rank-0.log"), (std::set<int64_t>{3, 4})) << rerun.output;
  EXPECT_TRUE(fs::exists(checkpoints + "/hf-export/model.safetensors")) << rerun.output;
  EXPECT_EQ(PartialEntries(checkpoints), std::vector<std::string>{});
}

}  // namespace
}  // namespace headroom::e2e
