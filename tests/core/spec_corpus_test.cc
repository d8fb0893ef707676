// The spec corpus (tests/core/testdata/specs, format in its README.md): every invalid file
// reports exactly the paths it expects, every valid file and every configs/*.yaml parses,
// and `headroom validate` prints what the parser reports.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/spec/training_job.h"
#include "tests/core/spec_test_util.h"
#include "tests/helpers/run_command.h"

namespace headroom::spec {
namespace {

namespace fs = std::filesystem;
using testing_util::AllErrors;
using testing_util::ErrorPaths;

const fs::path kSpecs = fs::path(HEADROOM_SOURCE_DIR) / "tests/core/testdata/specs";

std::vector<fs::path> YamlFiles(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The "# expect: <path>" header lines; "<document>" is the path "".
std::set<std::string> ExpectedPaths(const fs::path& file, std::string* rule) {
  std::ifstream in(file);
  std::set<std::string> paths;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# expect: ", 0) == 0) {
      const std::string path = line.substr(10);
      paths.insert(path == "<document>" ? "" : path);
    } else if (line.rfind("# rule: ", 0) == 0) {
      *rule = line.substr(8);
    } else {
      break;
    }
  }
  return paths;
}

TEST(SpecCorpus, EveryInvalidSpecReportsExactlyItsExpectedPaths) {
  const std::vector<fs::path> files = YamlFiles(kSpecs / "invalid");
  ASSERT_GE(files.size(), 35u);
  for (const fs::path& file : files) {
    std::string rule;
    const std::set<std::string> expected = ExpectedPaths(file, &rule);
    ASSERT_FALSE(expected.empty()) << file << " has no # expect: line";
    ParseResult r = ParseTrainingJobFile(file.string());
    EXPECT_FALSE(r.job.has_value()) << file.filename();
    EXPECT_EQ(ErrorPaths(r), expected) << file.filename() << " (" << rule << ")\n" << AllErrors(r);
    for (const SpecError& e : r.errors) {
      EXPECT_FALSE(e.message.empty()) << file.filename();
      // Problems found in a file point at a line, except fields that are absent.
      if (e.message.rfind("required", 0) != 0 && e.message.rfind("empty document", 0) != 0) {
        EXPECT_GT(e.line, 0) << file.filename() << ": " << e.ToString();
      }
    }
  }
}

TEST(SpecCorpus, EveryValidSpecParses) {
  const std::vector<fs::path> files = YamlFiles(kSpecs / "valid");
  ASSERT_GE(files.size(), 5u);
  for (const fs::path& file : files) {
    ParseResult r = ParseTrainingJobFile(file.string());
    EXPECT_TRUE(r.ok()) << file.filename() << "\n" << AllErrors(r);
    if (r.ok()) {
      ParseResult again = ParseTrainingJob(ToYaml(*r.job));
      ASSERT_TRUE(again.ok()) << file.filename() << "\n" << AllErrors(again);
      EXPECT_EQ(*again.job, *r.job) << file.filename();
    }
  }
}

TEST(SpecCorpus, EveryExampleConfigIsValid) {
  const std::vector<fs::path> files = YamlFiles(fs::path(HEADROOM_SOURCE_DIR) / "configs");
  ASSERT_GE(files.size(), 3u);
  for (const fs::path& file : files) {
    ParseResult r = ParseTrainingJobFile(file.string());
    EXPECT_TRUE(r.ok()) << file.filename() << "\n" << AllErrors(r);
  }
  ParseResult drill = ParseTrainingJobFile((fs::path(HEADROOM_SOURCE_DIR) / "configs/drill-host-leak.yaml").string());
  ASSERT_TRUE(drill.ok());
  EXPECT_EQ(drill.job->spec.debug.host_leak_bytes_per_step, 48LL << 20);
}

using headroom::testing::CommandResult;
using headroom::testing::RunCommand;

// `headroom validate` is built by operator/; skip when this build has not made it.
TEST(ValidateCommand, ExitCodesAndOutput) {
  const fs::path headroom = fs::path(HEADROOM_BINARY_DIR) / "bin/headroom";
  if (!fs::exists(headroom)) GTEST_SKIP() << headroom << " is not built";
  const fs::path good = fs::path(HEADROOM_SOURCE_DIR) / "configs/reverse-tiny.yaml";
  CommandResult ok = RunCommand(headroom.string() + " validate " + good.string());
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_EQ(ok.out, good.string() + ": valid TrainingJob reverse-tiny\n");

  const fs::path bad = kSpecs / "invalid/several-problems-at-once.yaml";
  CommandResult failed = RunCommand(headroom.string() + " validate " + bad.string());
  EXPECT_EQ(failed.code, 2);
  std::string expected;
  for (const SpecError& e : ParseTrainingJobFile(bad.string()).errors) expected += e.ToString() + "\n";
  EXPECT_EQ(failed.out, expected);
  EXPECT_NE(failed.out.find("spec.grpo.groupSize: must be >= 2, got 1 (line 20)\n"), std::string::npos) << failed.out;

  CommandResult missing = RunCommand(headroom.string() + " validate /nonexistent.yaml");
  EXPECT_EQ(missing.code, 2);
  EXPECT_EQ(missing.out, "<document>: cannot read /nonexistent.yaml: No such file or directory\n");

  CommandResult help = RunCommand(headroom.string() + " --help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("validate"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace headroom::spec
