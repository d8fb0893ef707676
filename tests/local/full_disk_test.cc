// FullDiskNote: a run that ended for a full disk gets one line naming the filesystem and
// the checkpoint kept; any other ending gets none.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/checkpoint/checkpoint_layout.h"
#include "local/full_disk.h"
#include "tests/helpers/temp_dir.h"

namespace headroom::local {
namespace {

namespace fs = std::filesystem;

// A workdir whose checkpoints/ holds a complete step 2 (its manifest and one data file).
std::string WorkdirWithStep2(const headroom::testing::TempDir& dir) {
  const std::string workdir = dir.path() + "/run";
  fs::create_directories(workdir + "/checkpoints/step-000002");
  std::ofstream(workdir + "/checkpoints/step-000002/manifest.json") << "{}";
  std::ofstream(workdir + "/checkpoints/step-000002/rank-00000.bin") << std::string(4096, 'x');
  checkpoint::WriteLatest(workdir + "/checkpoints", 2);
  return workdir;
}

TEST(FullDiskNote, NamesTheFilesystemAndTheCheckpointKeptWhenAFailureSaysENOSPC) {
  headroom::testing::TempDir dir("headroom-full-disk");
  const std::string workdir = WorkdirWithStep2(dir);
  const std::string note = FullDiskNote(
      workdir, {"rank 0 crashed during step 3: cannot write x: " + std::string(std::strerror(ENOSPC)), ""}, true);
  const std::optional<FilesystemSpace> space = SpaceOf(workdir);
  ASSERT_TRUE(space);
  EXPECT_EQ(note.rfind("disk full: " + workdir + " is on the filesystem at " + space->mount_point + " with ", 0), 0u)
      << note;
  EXPECT_NE(note.find("kept: the checkpoint at step 2 in " + workdir + "/checkpoints"), std::string::npos) << note;
  EXPECT_NE(note.find("resume from step 2"), std::string::npos) << note;
}

// The Hugging Face cache on its own small filesystem fills up during a download: the
// note names the cache's filesystem, not the workdir's (which has room).
TEST(FullDiskNote, NamesTheFilesystemTheFailureNamesWhenItIsNotTheWorkdirs) {
  headroom::testing::TempDir dir("headroom-full-disk");
  const std::string workdir = WorkdirWithStep2(dir);
  const std::string cache = dir.path() + "/hub-cache";
  fs::create_directories(cache);
  if (::mount("tmpfs", cache.c_str(), "tmpfs", 0, "size=64k") != 0) {
    GTEST_SKIP() << "cannot mount a small tmpfs for the cache (needs root): " << std::strerror(errno);
  }
  const std::string failure = "spec.model.hub: org/model@main: model.safetensors: the cache " + cache + " is full (" +
                              std::strerror(ENOSPC) + "); 40960 of 90112 bytes kept in " + cache +
                              "/models--org--model/blobs/abc.incomplete to resume once there is space (rank 0 refused "
                              "to start (exit 2))";
  const std::string note = FullDiskNote(workdir, {failure, ""}, true);
  ::umount2(cache.c_str(), MNT_DETACH);
  const std::optional<FilesystemSpace> space = SpaceOf(workdir);
  ASSERT_TRUE(space);
  EXPECT_EQ(note.rfind("disk full: " + cache + " is on the filesystem at " + cache + " with ", 0), 0u) << note;
  EXPECT_NE(note.find("(not the workdir's: " + workdir + " has "), std::string::npos) << note;
}

TEST(FullDiskNote, IsEmptyForAnyOtherEnding) {
  headroom::testing::TempDir dir("headroom-full-disk");
  const std::string workdir = WorkdirWithStep2(dir);
  // A failure that is not about space, on a filesystem with room for another checkpoint
  // (a 4 KiB step: any test machine's temp directory has that).
  EXPECT_EQ(FullDiskNote(workdir, {"rank 0 crashed during step 3: Segmentation fault", ""}, true), "");
  EXPECT_EQ(FullDiskNote(workdir, {"all 3 steps done", ""}, false), "");
}

TEST(SpaceOf, IsTheMountPointAboveAPathThatDoesNotExistYet) {
  const std::optional<FilesystemSpace> root = SpaceOf("/");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->mount_point, "/");
  const std::optional<FilesystemSpace> missing = SpaceOf("/proc/no/such/dir");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->mount_point, "/proc");
}

}  // namespace
}  // namespace headroom::local
