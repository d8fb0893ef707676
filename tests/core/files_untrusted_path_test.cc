// The one check of names from outside before they become paths (core/files/
// untrusted_path.h): relative, no "." or "..", no empty component, no control character,
// and below a directory with links, nothing that leads out through one.
#include "core/files/untrusted_path.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/helpers/temp_dir.h"

namespace headroom::files {
namespace {

namespace fs = std::filesystem;

TEST(UntrustedPath, RelativeNamesBelowADirectoryPass) {
  for (const char* ok : {"model.safetensors", "sub/model-00001-of-00002.safetensors", "a..b", ".hidden"}) {
    EXPECT_EQ(WhyNotRelativeBelow(ok), "") << ok;
  }
  EXPECT_EQ(WhyNotFileName("0123abc"), "");
}

TEST(UntrustedPath, EveryWayOutIsRefusedSayingWhy) {
  EXPECT_EQ(WhyNotRelativeBelow(""), "is empty");
  EXPECT_EQ(WhyNotRelativeBelow("/etc/passwd"), "is an absolute path");
  EXPECT_EQ(WhyNotRelativeBelow("../../x"), "has a '..' component");
  EXPECT_EQ(WhyNotRelativeBelow("a/../../x"), "has a '..' component");
  EXPECT_EQ(WhyNotRelativeBelow(".."), "has a '..' component");
  EXPECT_EQ(WhyNotRelativeBelow("./x"), "has a '.' component");
  EXPECT_EQ(WhyNotRelativeBelow("a//b"), "has an empty component");
  EXPECT_EQ(WhyNotRelativeBelow("a/"), "has an empty component");
  EXPECT_EQ(WhyNotRelativeBelow("a\\..\\b"), "has a backslash");
  EXPECT_EQ(WhyNotRelativeBelow(std::string("a\nb")), "has a control character");
  EXPECT_EQ(WhyNotFileName("a/b"), "has a '/'");
  EXPECT_EQ(WhyNotFileName(".."), "has a '..' component");
  EXPECT_EQ(Quoted(std::string("a\nb\"")), "\"a\\u000ab\\\"\"");
}

TEST(UntrustedPath, ALinkOutOfTheDirectoryIsRefused) {
  headroom::testing::TempDir dir("untrusted-path");
  const fs::path root = fs::path(dir.path()) / "root";
  fs::create_directories(root / "inside");
  fs::create_directories(fs::path(dir.path()) / "outside");
  fs::create_directory_symlink(fs::path(dir.path()) / "outside", root / "out");
  fs::create_directory_symlink("inside", root / "in");
  EXPECT_EQ(PathBelow(root, "inside/file"), root / "inside/file");
  EXPECT_EQ(PathBelow(root, "in/file"), root / "in/file");
  try {
    PathBelow(root, "out/file");
    ADD_FAILURE() << "a link out was followed";
  } catch (const UntrustedPathError& e) {
    EXPECT_EQ(std::string(e.what()), "\"out/file\" leads out of " + root.string() + " through a link");
  }
  EXPECT_THROW(PathBelow(root, "../outside/file"), UntrustedPathError);
}

}  // namespace
}  // namespace headroom::files
