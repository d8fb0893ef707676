#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/files/remove_tree.h"

namespace fs = std::filesystem;

namespace headroom::files {
namespace {

fs::path MakeScratch() {
  std::string pattern = (fs::temp_directory_path() / "headroom-remove-tree-XXXXXX").string();
  const char* made = ::mkdtemp(pattern.data());
  EXPECT_NE(made, nullptr);
  return fs::path(pattern);
}

void Touch(const fs::path& p) { std::ofstream(p) << "x"; }

TEST(RemoveTree, RemovesNestedDirectoriesAndFiles) {
  const fs::path root = MakeScratch();
  fs::create_directories(root / "a/b/c");
  Touch(root / "a/file");
  Touch(root / "a/b/c/deep");
  Touch(root / ".hidden");
  RemoveTree(root);
  EXPECT_FALSE(fs::exists(root));
}

TEST(RemoveTree, RemovesLinksWithoutFollowingThem) {
  const fs::path keep = MakeScratch();
  Touch(keep / "precious");
  const fs::path root = MakeScratch();
  fs::create_directory_symlink(keep, root / "to-dir");
  fs::create_symlink(keep / "precious", root / "to-file");
  RemoveTree(root);
  EXPECT_FALSE(fs::exists(root));
  EXPECT_TRUE(fs::exists(keep / "precious")) << "a link's target must survive";
  RemoveTree(keep);
}

TEST(RemoveTree, PlainFileAndMissingPath) {
  const fs::path root = MakeScratch();
  Touch(root / "f");
  RemoveTree(root / "f");
  EXPECT_FALSE(fs::exists(root / "f"));
  std::error_code ec;
  EXPECT_TRUE(RemoveTree(root / "never-existed", ec));
  EXPECT_FALSE(ec);
  RemoveTree(root);
}

TEST(RemoveTree, ReportsWhatItCouldNotRemove) {
  // A path through a regular file cannot even be looked at (ENOTDIR), root or not.
  const fs::path root = MakeScratch();
  Touch(root / "file");
  std::error_code ec;
  EXPECT_FALSE(RemoveTree(root / "file" / "child", ec));
  EXPECT_EQ(ec, std::errc::not_a_directory);
  try {
    RemoveTree(root / "file" / "child");
    ADD_FAILURE() << "no exception";
  } catch (const fs::filesystem_error& e) {
    EXPECT_NE(std::string(e.what()).find("file/child"), std::string::npos) << e.what();
  }
  RemoveTree(root);
}

}  // namespace
}  // namespace headroom::files
