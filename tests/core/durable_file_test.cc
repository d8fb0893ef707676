// The one atomic file write (checkpoint::ReplaceFileAtomically): the file is replaced
// whole or not at all, a full disk included (a real small tmpfs: skipped, saying why,
// where this process may not mount one), and no temporary is left beside it either way.
#include "core/checkpoint/durable_file.h"

#include <gtest/gtest.h>
#include <sys/mount.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/helpers/temp_dir.h"

namespace headroom::checkpoint {
namespace {

namespace fs = std::filesystem;
using headroom::testing::TempDir;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  return names;
}

TEST(DurableFile, ReplacesTheFileWholeAndLeavesNoTemporary) {
  TempDir dir;
  const std::string path = dir.path() + "/summary.json";
  ReplaceFileAtomically(path, "old");
  ReplaceFileAtomically(path, "new contents");
  EXPECT_EQ(ReadAll(path), "new contents");
  EXPECT_EQ(Names(dir.path()), std::vector<std::string>{"summary.json"});
}

TEST(DurableFile, AFailedRenameKeepsTheTargetAndLeavesNoTemporary) {
  TempDir dir;
  const std::string path = dir.path() + "/taken";
  fs::create_directories(path + "/inside");  // rename(2) cannot put a file over a non-empty directory
  EXPECT_THROW(ReplaceFileAtomically(path, "x"), CheckpointError);
  EXPECT_EQ(Names(dir.path()), std::vector<std::string>{"taken"});
  EXPECT_TRUE(fs::is_directory(path + "/inside"));
}

// A tmpfs of `kib` KiB mounted on a fresh directory, unmounted at the end.
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

TEST(DurableFile, AFullDiskKeepsThePreviousFileAndLeavesNoTemporary) {
  TempDir dir;
  SmallTmpfs disk(dir.path() + "/disk", 256);
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN)";
  const std::string path = dir.path() + "/disk/memory.csv";
  ReplaceFileAtomically(path, "step,host_bytes\n1,100\n");
  try {
    ReplaceFileAtomically(path, std::string(1 << 20, 'x'));  // 1 MiB on a 256 KiB disk
    ADD_FAILURE() << "a write larger than the disk succeeded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write " + path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No space left on device"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ReadAll(path), "step,host_bytes\n1,100\n");
  EXPECT_EQ(Names(dir.path() + "/disk"), std::vector<std::string>{"memory.csv"});
}

}  // namespace
}  // namespace headroom::checkpoint
