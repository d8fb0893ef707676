// The run's record files are replaced whole or not at all, a full disk included (a real
// small tmpfs: skipped, saying why, where this process may not mount one).
#include "operator/local/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/mount.h>

#include <filesystem>
#include <string>

#include "tests/operator/local_test_support.h"

namespace headroom::local {
namespace {

namespace fs = std::filesystem;
using testing::ReadAll;
using testing::TempDir;

TEST(AtomicFile, ReplacesTheFileWholeAndLeavesNoTemporary) {
  TempDir dir;
  const std::string path = dir.path() + "/summary.json";
  WriteFileAtomically(path, "old");
  WriteFileAtomically(path, "new contents");
  EXPECT_EQ(ReadAll(path), "new contents");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

// A tmpfs of `bytes` mounted on a fresh directory, unmounted at the end.
class SmallTmpfs {
 public:
  explicit SmallTmpfs(const std::string& where, int kib) : path_(where) {
    fs::create_directories(path_);
    const std::string options = "size=" + std::to_string(kib) + "k";
    mounted_ = mount("tmpfs", path_.c_str(), "tmpfs", 0, options.c_str()) == 0;
  }
  ~SmallTmpfs() {
    if (mounted_) umount2(path_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }

 private:
  std::string path_;
  bool mounted_ = false;
};

TEST(AtomicFile, AFullDiskKeepsThePreviousFileAndLeavesNoTemporary) {
  TempDir dir;
  SmallTmpfs disk(dir.path() + "/disk", 256);
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN)";
  const std::string path = dir.path() + "/disk/memory.csv";
  WriteFileAtomically(path, "step,host_bytes\n1,100\n");
  try {
    WriteFileAtomically(path, std::string(1 << 20, 'x'));  // 1 MiB on a 256 KiB disk
    ADD_FAILURE() << "a write larger than the disk succeeded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write " + path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No space left on device"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ReadAll(path), "step,host_bytes\n1,100\n");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

}  // namespace
}  // namespace headroom::local
