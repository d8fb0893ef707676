// `headroom run` refuses a build that is stale or did not finish: the stamp written by the
// real cmake/build_stamp.cmake, compared against a source tree as it changes.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "core/hf/hub_digest.h"
#include "local/build_freshness.h"
#include "tests/helpers/run_command.h"
#include "tests/local/local_test_support.h"

namespace headroom::local {
namespace {
namespace fs = std::filesystem;

void Write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

// A source tree and a build tree with a stamp written by the product's own script.
class BuildFreshnessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Write(src() / "CMakeLists.txt", "project(x)\n");
    Write(src() / "core/a.cc", "int a;\n");
    Write(src() / "worker/model/b.h", "int b();\n");
    Write(src() / "operator/README.md", "not a source\n");
    Write(build() / "CMakeCache.txt", "");
    for (const char* name : {"headroom", "headroom-worker"}) Write(bin() / name, "binary\n");
    WriteStamp();
  }
  fs::path src() const { return fs::path(dir_.path()) / "src"; }
  fs::path build() const { return fs::path(dir_.path()) / "build"; }
  fs::path bin() const { return build() / "bin"; }
  void WriteStamp() {
    const headroom::testing::CommandResult stamp = headroom::testing::RunCommand(
        "cmake -DSOURCE_DIR=" + src().string() + " -DSTAMP=" + (bin() / "headroom.build-stamp").string() +
        " -P " HEADROOM_SOURCE_DIR "/cmake/build_stamp.cmake");
    ASSERT_EQ(stamp.code, 0) << stamp.out;
    // As after a real build: the stamp is written after the binaries, so it is newer.
    fs::last_write_time(bin() / "headroom.build-stamp", fs::file_time_type::clock::now() + std::chrono::seconds(1));
  }
  BuildFreshness Check() const { return CheckBuildFreshness(bin(), {"headroom", "headroom-worker"}); }

  testing::TempDir dir_;
};

TEST_F(BuildFreshnessTest, AFreshBuildIsRunnable) {
  const BuildFreshness f = Check();
  EXPECT_TRUE(f.fresh) << f.problem;
}

TEST_F(BuildFreshnessTest, AChangedSourceMakesItStaleAndIsNamed) {
  Write(src() / "worker/model/b.h", "int b(int);\n");
  const BuildFreshness f = Check();
  EXPECT_FALSE(f.fresh);
  EXPECT_NE(f.problem.find("is stale: worker/model/b.h changed"), std::string::npos) << f.problem;
  EXPECT_NE(f.problem.find("scripts/setup.sh"), std::string::npos) << "says what to do: " << f.problem;

  WriteStamp();  // rebuilt
  EXPECT_TRUE(Check().fresh);
}

TEST_F(BuildFreshnessTest, AddedAndRemovedSourcesAreNamed) {
  Write(src() / "local/new.cc", "int n;\n");
  fs::remove(src() / "core/a.cc");
  Write(src() / "operator/notes.txt", "not a source: ignored\n");
  const BuildFreshness f = Check();
  EXPECT_FALSE(f.fresh);
  EXPECT_NE(f.problem.find("local/new.cc added"), std::string::npos) << f.problem;
  EXPECT_NE(f.problem.find("core/a.cc removed"), std::string::npos) << f.problem;
  EXPECT_EQ(f.problem.find("notes.txt"), std::string::npos) << f.problem;
}

// Each top folder whose sources go into the runtime binaries, the local runtime's and the
// CLI's included, is searched for new files.
TEST_F(BuildFreshnessTest, ASourceAddedToAnyFolderOfTheBinariesIsNamed) {
  for (const std::string rel : {"core/n.cc", "worker/n.cc", "operator/n.cc", "local/n.cc", "cli/n.cc"}) {
    Write(src() / rel, "int n;\n");
    const BuildFreshness f = Check();
    EXPECT_NE(f.problem.find(rel + " added"), std::string::npos) << rel << ": " << f.problem;
    fs::remove(src() / rel);
  }
}

TEST_F(BuildFreshnessTest, ManyChangesAreCountedNotListed) {
  for (int i = 0; i < 5; ++i) Write(src() / ("core/new" + std::to_string(i) + ".h"), "x");
  const BuildFreshness f = Check();
  EXPECT_NE(f.problem.find("and 2 more added"), std::string::npos) << f.problem;
}

TEST_F(BuildFreshnessTest, ABinaryNewerThanTheStampMeansTheBuildDidNotFinish) {
  fs::last_write_time(bin() / "headroom-worker", fs::file_time_type::clock::now() + std::chrono::seconds(5));
  const BuildFreshness f = Check();
  EXPECT_FALSE(f.fresh);
  EXPECT_NE(f.problem.find("did not finish (headroom-worker is newer"), std::string::npos) << f.problem;
}

TEST_F(BuildFreshnessTest, NoStampInABuildTreeMeansTheBuildDidNotFinish) {
  fs::remove(bin() / "headroom.build-stamp");
  const BuildFreshness f = Check();
  EXPECT_FALSE(f.fresh);
  EXPECT_NE(f.problem.find("did not finish (no headroom.build-stamp)"), std::string::npos) << f.problem;

  fs::remove(build() / "CMakeCache.txt");  // installed binaries, not a build tree
  EXPECT_TRUE(Check().fresh);
}

TEST_F(BuildFreshnessTest, BinariesAwayFromTheirSourcesAreNotChecked) {
  fs::rename(src(), fs::path(dir_.path()) / "moved");
  EXPECT_TRUE(Check().fresh);
}

TEST_F(BuildFreshnessTest, Sha256AgreesWithCMake) {
  Write(src() / "core/blob.bin", std::string("\0\xff headroom \n", 13));
  const headroom::testing::CommandResult sum =
      headroom::testing::RunCommand("cmake -E sha256sum " + (src() / "core/blob.bin").string());
  ASSERT_EQ(sum.code, 0) << sum.out;
  EXPECT_EQ(sum.out.substr(0, 64), hf::FileSha256((src() / "core/blob.bin").string()));
  EXPECT_THROW(hf::FileSha256((src() / "missing").string()), std::runtime_error);
}

// The command itself: a copy of the real `headroom` in a build tree whose build never
// finished refuses to start the job, and says why.
TEST_F(BuildFreshnessTest, HeadroomRunRefusesAnUnfinishedBuild) {
  const fs::path real = fs::path(HEADROOM_BINARY_DIR) / "bin" / "headroom";
  if (!fs::exists(real)) GTEST_SKIP() << "headroom not built";
  fs::copy_file(real, bin() / "headroom", fs::copy_options::overwrite_existing);
  fs::remove(bin() / "headroom.build-stamp");
  const headroom::testing::CommandResult run =
      headroom::testing::RunCommand("env -u HEADROOM_ALLOW_STALE_BUILD " + (bin() / "headroom").string() + " run " +
                                    HEADROOM_SOURCE_DIR "/configs/reverse-tiny.yaml --workdir " + dir_.path() + "/run");
  EXPECT_EQ(run.code, 1) << run.out;
  EXPECT_NE(run.out.find("did not finish"), std::string::npos) << run.out;
  EXPECT_FALSE(fs::exists(fs::path(dir_.path()) / "run" / "summary.json")) << "no job was started";
}

}  // namespace
}  // namespace headroom::local
