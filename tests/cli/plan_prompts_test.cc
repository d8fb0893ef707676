// `headroom plan` counts the prompts the job's data holds: it asks `headroom-worker prompts`
// for the longest (worker/cli/prompts_command.h) and plans the update and the rollout's
// prefill at it when it is shorter than maxPromptLength; with --at-max-prompt-length, or
// when the worker cannot read the data, at maxPromptLength, saying why.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/headroom_binary.h"
#include "tests/helpers/temp_dir.h"

namespace {
namespace fs = std::filesystem;
using headroom::testing::CommandResult;
using headroom::testing::RunCommand;
using nlohmann::json;

const std::string kWorker = std::string(HEADROOM_BINARY_DIR) + "/bin/headroom-worker";
const std::string kTextJob = "configs/addition-text-qwen2.yaml";

// Both binaries run in the source directory: the example job's paths are relative to it.
CommandResult InSource(const std::string& command) {
  return RunCommand("cd '" + headroom::testing::kSourceDir + "' && " + command);
}

json PlanJson(const std::string& job, const std::string& flags = "") {
  const CommandResult r =
      InSource("{ " + headroom::testing::kHeadroomBinary + " plan " + job + " --json " + flags + " 2>/dev/null; }");
  EXPECT_EQ(r.code, 0) << r.out;
  return json::parse(r.out);
}

int64_t HostOf(const json& plan, const std::string& name) {
  for (const json& c : plan["components"]) {
    if (c["name"] == name) return c["host_bytes"].get<int64_t>();
  }
  return -1;
}

// The example text job with `edit` applied to its YAML text (one substring replaced).
fs::path EditedTextJob(const fs::path& dir, const std::string& from, const std::string& to) {
  std::ifstream in(fs::path(headroom::testing::kSourceDir) / kTextJob);
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml = text.str();
  const auto at = yaml.find(from);
  EXPECT_NE(at, std::string::npos) << kTextJob << " no longer has " << from;
  if (at != std::string::npos) yaml.replace(at, from.size(), to);
  const fs::path job = dir / "job.yaml";
  std::ofstream(job) << yaml;
  return job;
}

bool HaveBothBinaries() { return headroom::testing::HaveHeadroomBinary() && fs::exists(kWorker); }

TEST(PlanPrompts, TheExampleTextJobIsPlannedAtTheLongestPromptItsDataHolds) {
  if (!HaveBothBinaries()) GTEST_SKIP() << "headroom and headroom-worker are not built in " << HEADROOM_BINARY_DIR;
  const CommandResult measured = InSource("{ " + kWorker + " prompts --job " + kTextJob + " 2>/dev/null; }");
  ASSERT_EQ(measured.code, 0) << measured.out;
  const json prompts = json::parse(measured.out);
  const int64_t longest = prompts["longest"].get<int64_t>();
  EXPECT_EQ(prompts["task"], "text");
  EXPECT_EQ(prompts["kept"], 2000);  // configs/data/addition-text/train.jsonl, every record kept
  EXPECT_EQ(prompts["skipped"], 0);
  EXPECT_GT(prompts["held_out_longest"].get<int64_t>(), 0);
  EXPECT_GE(longest, prompts["held_out_longest"].get<int64_t>());
  EXPECT_LE(prompts["shortest"].get<int64_t>(), longest);
  ASSERT_LT(longest, 64);  // the job's maxPromptLength: the data is shorter

  const json at_data = PlanJson(kTextJob);
  const json at_max = PlanJson(kTextJob, "--at-max-prompt-length");
  EXPECT_EQ(at_data["prompt_length"], longest);
  EXPECT_EQ(at_data["data_longest_prompt"], longest);
  EXPECT_EQ(at_max["prompt_length"], 64);
  EXPECT_EQ(at_max["data_longest_prompt"], 0);
  // The update's rows and the prefill's prompts are shorter; the generation cache is
  // allocated for maxPromptLength either way.
  EXPECT_LT(HostOf(at_data, "activations"), HostOf(at_max, "activations"));
  EXPECT_LT(at_data["host_total_bytes"].get<int64_t>(), at_max["host_total_bytes"].get<int64_t>());
  EXPECT_EQ(HostOf(at_data, "generation cache"), HostOf(at_max, "generation cache"));

  const CommandResult table = InSource(headroom::testing::kHeadroomBinary + " plan " + kTextJob);
  ASSERT_EQ(table.code, 0) << table.out;
  EXPECT_NE(table.out.find("prompts: at " + std::to_string(longest) + " tokens, the longest the job's data holds"),
            std::string::npos)
      << table.out;
}

// A maxPromptLength below some records: the job leaves them out, and so does the plan.
TEST(PlanPrompts, RecordsLongerThanMaxPromptLengthAreLeftOutOfThePlanToo) {
  if (!HaveBothBinaries()) GTEST_SKIP() << "headroom and headroom-worker are not built in " << HEADROOM_BINARY_DIR;
  headroom::testing::TempDir dir("headroom-plan-prompts");
  const fs::path job = EditedTextJob(dir.path(), "maxPromptLength: 64", "maxPromptLength: 40");
  const CommandResult measured = InSource("{ " + kWorker + " prompts --job " + job.string() + " 2>/dev/null; }");
  ASSERT_EQ(measured.code, 0) << measured.out;
  const json prompts = json::parse(measured.out);
  EXPECT_GT(prompts["skipped"].get<int64_t>(), 0);
  EXPECT_EQ(prompts["kept"].get<int64_t>() + prompts["skipped"].get<int64_t>(), 2000);
  const json plan = PlanJson(job.string());
  EXPECT_LE(plan["prompt_length"].get<int64_t>(), 40);
  EXPECT_EQ(plan["data_prompts_skipped"], prompts["skipped"]);
}

// Data the worker cannot read here (a cluster's volume path) or no worker at all: the plan
// still prints, at maxPromptLength, with the reason.
TEST(PlanPrompts, UnreadableDataFallsBackToMaxPromptLengthWithTheReason) {
  if (!HaveBothBinaries()) GTEST_SKIP() << "headroom and headroom-worker are not built in " << HEADROOM_BINARY_DIR;
  headroom::testing::TempDir dir("headroom-plan-prompts");
  const fs::path job = EditedTextJob(dir.path(), "path: configs/data/addition-text/train.jsonl",
                                     "path: /data/not-mounted-here/train.jsonl");
  const json plan = PlanJson(job.string());
  EXPECT_EQ(plan["prompt_length"], 64);
  EXPECT_EQ(plan["data_longest_prompt"], 0);
  EXPECT_NE(plan["data_prompts_not_known"].get<std::string>().find("/data/not-mounted-here/train.jsonl"),
            std::string::npos)
      << plan.dump();
  const CommandResult table = InSource(headroom::testing::kHeadroomBinary + " plan " + job.string());
  EXPECT_EQ(table.code, 0) << table.out;
  EXPECT_NE(table.out.find("prompts: at maxPromptLength 64 (the data's prompts are not known here: "),
            std::string::npos)
      << table.out;

  const CommandResult no_worker =
      InSource("{ HEADROOM_WORKER_BIN=/nonexistent/headroom-worker " + headroom::testing::kHeadroomBinary + " plan " +
               kTextJob + " --json 2>/dev/null; }");
  ASSERT_EQ(no_worker.code, 0) << no_worker.out;
  const json fallback = json::parse(no_worker.out);
  EXPECT_EQ(fallback["prompt_length"], 64);
  EXPECT_NE(fallback["data_prompts_not_known"].get<std::string>().find("/nonexistent/headroom-worker"),
            std::string::npos)
      << fallback.dump();
}

}  // namespace
