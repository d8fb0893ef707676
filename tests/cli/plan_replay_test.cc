// `headroom plan` and `headroom replay` end to end, through the built binary (skipped with
// the reason when the operator part has not been built in this tree).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli/headroom_binary.h"

namespace {

using headroom::testing::HaveHeadroomBinary;
using headroom::testing::RunHeadroom;
using Result = headroom::testing::CommandResult;
const std::string& kBinary = headroom::testing::kHeadroomBinary;
const std::string& kSource = headroom::testing::kSourceDir;

std::vector<nlohmann::json> JsonLines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ReplayCliTest, OneJsonLinePerStepWithTheDesignKeys) {
  if (!HaveHeadroomBinary()) GTEST_SKIP() << kBinary << " not built (operator part)";
  Result r = RunHeadroom("replay " + kSource + "/tests/core/testdata/traces/host_leak_linear.csv");
  ASSERT_EQ(r.code, 0) << r.out;
  auto lines = JsonLines(r.out);
  ASSERT_EQ(lines.size(), 9u);
  for (const auto& j : lines) {
    for (const char* key : {"step", "action", "resource", "forecast_peak_bytes", "steps_to_limit", "reason"}) {
      EXPECT_TRUE(j.contains(key)) << key << " in " << j.dump();
    }
  }
  // The leak is too young to be confirmed before it crosses at step 7: the guard waits
  // until the limit itself is forecast within two steps, and acts then, a step to spare.
  EXPECT_EQ(lines[0]["action"], "none");
  EXPECT_EQ(lines[4]["action"], "none");
  EXPECT_EQ(lines[5]["action"], "restart");
  EXPECT_EQ(lines[5]["resource"], "host");
}

TEST(ReplayCliTest, OneJumpThenAPlateauGetsNoActionAndIsCalledALevelShift) {
  if (!HaveHeadroomBinary()) GTEST_SKIP() << kBinary << " not built (operator part)";
  // Host flat at 30% of 128 GiB, +28% of the limit at step 4, then flat at 58%.
  Result r = RunHeadroom("replay " + kSource + "/tests/core/testdata/traces/host_level_shift.csv");
  ASSERT_EQ(r.code, 0) << r.out;
  auto lines = JsonLines(r.out);
  ASSERT_EQ(lines.size(), 60u);
  int called_a_shift = 0;
  for (const auto& j : lines) {
    EXPECT_EQ(j["action"], "none") << j.dump();
    const std::string reason = j["reason"];
    EXPECT_EQ(reason.find("leak"), std::string::npos) << j.dump();
    if (j["step"].get<int>() >= 5) {
      called_a_shift += reason.find("a level shift of") != std::string::npos;
    }
  }
  // Every step whose window holds the jump (steps 5 to 15; from step 16 it has left the
  // 12-step window and the level is just flat).
  EXPECT_GE(called_a_shift, 10) << r.out;
}

TEST(ReplayCliTest, LimitsAcceptBytesAndQuantities) {
  if (!HaveHeadroomBinary()) GTEST_SKIP() << kBinary << " not built (operator part)";
  const std::string trace = kSource + "/tests/core/testdata/traces/host_leak_linear.csv";
  Result bytes = RunHeadroom("replay " + trace + " --host-limit 8589934592");
  Result quantity = RunHeadroom("replay " + trace + " --host-limit 8Gi --horizon 3 --host-threshold 0.9");
  ASSERT_EQ(bytes.code, 0) << bytes.out;
  ASSERT_EQ(quantity.code, 0) << quantity.out;
  for (const auto& j : JsonLines(bytes.out)) EXPECT_EQ(j["action"], "none") << j.dump();
  for (const auto& j : JsonLines(quantity.out)) EXPECT_EQ(j["action"], "none") << j.dump();
  Result bad = RunHeadroom("replay " + trace + " --host-limit 8GB");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("--host-limit"), std::string::npos) << bad.out;
}

TEST(ReplayCliTest, MalformedTraceNamesLineAndColumn) {
  if (!HaveHeadroomBinary()) GTEST_SKIP() << kBinary << " not built (operator part)";
  std::string path = WriteTemp("bad_trace.csv", "step,host_bytes,gpu_bytes\n0,100,0\n1,1e3,0\n");
  Result r = RunHeadroom("replay " + path);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("bad_trace.csv:3: column host_bytes: not an integer: '1e3'"), std::string::npos) << r.out;
  r = RunHeadroom("replay /nonexistent/trace.csv");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("/nonexistent/trace.csv: cannot open"), std::string::npos) << r.out;
}

// A worker's step log is a trace too: the same rows as JSON lines (the GPU columns under
// the step record's names) give the same decisions as the CSV.
TEST(ReplayCliTest, AStepLogReplaysLikeTheSameTraceAsCsv) {
  if (!HaveHeadroomBinary()) GTEST_SKIP() << kBinary << " not built (operator part)";
  const std::string csv = kSource + "/tests/core/testdata/traces/host_leak_linear.csv";
  std::ifstream in(csv);
  std::string line, log;
  std::vector<std::string> header;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cells;
    std::istringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
    if (header.empty()) {
      header = cells;
      continue;
    }
    nlohmann::json j;
    for (size_t i = 0; i < cells.size(); ++i) {
      static const std::map<std::string, std::string> kStepLogName = {{"gpu_bytes", "gpu_reserved_bytes"},
                                                                      {"gpu_limit_bytes", "gpu_total_bytes"}};
      auto renamed = kStepLogName.find(header[i]);
      j[renamed == kStepLogName.end() ? header[i] : renamed->second] = std::stoll(cells[i]);
    }
    log += j.dump() + "\n";
  }
  const std::string path = WriteTemp("steps.jsonl", log);
  Result from_csv = RunHeadroom("replay " + csv);
  Result from_log = RunHeadroom("replay " + path);
  ASSERT_EQ(from_log.code, 0) << from_log.out;
  EXPECT_EQ(from_log.out, from_csv.out);
  EXPECT_EQ(JsonLines(from_log.out).at(6)["action"], "restart");

  const std::string bad = WriteTemp("bad_steps.jsonl", log + "{\"host_bytes\":1}\n");
  Result r = RunHeadroom("replay " + bad);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("bad_steps.jsonl:10: not a step record: no integer \"step\""), std::string::npos) << r.out;
}

TEST(PlanCliTest, TableAndJson) {
  if (!HaveHeadroomBinary()) GTEST_SKIP() << kBinary << " not built (operator part)";
  const std::string job = kSource + "/configs/cluster-base-8gpu.yaml";
  Result table = RunHeadroom("plan " + job + " --gpu-memory 80Gi");
  ASSERT_EQ(table.code, 0) << table.out;
  for (const char* row : {"parameters", "gradients", "optimizer", "activations", "generation cache", "reference model",
                          "total per worker", "verdict:"}) {
    EXPECT_NE(table.out.find(row), std::string::npos) << row << " in\n" << table.out;
  }
  Result two = RunHeadroom("plan " + job + " --json --workers 2 --gpu-memory 80Gi");
  Result four = RunHeadroom("plan " + job + " --json --workers 4 --gpu-memory 80Gi");
  ASSERT_EQ(two.code, 0) << two.out;
  auto j2 = nlohmann::json::parse(two.out), j4 = nlohmann::json::parse(four.out);
  EXPECT_EQ(j2["workers"], 2);
  EXPECT_GT(j2["gpu_total_bytes"].get<int64_t>(), j4["gpu_total_bytes"].get<int64_t>())
      << "stage 2 shards with workers";
  EXPECT_EQ(j2["gpu_limit_bytes"], 80LL << 30);
  int64_t sum = 0;
  for (const auto& c : j2["components"]) sum += c["gpu_bytes"].get<int64_t>();
  EXPECT_EQ(sum, j2["gpu_total_bytes"].get<int64_t>());
}

// Ranks per pod: plan says the layout, render prints one pod per ranksPerPod ranks.
TEST(PlanCliTest, PlanAndRenderShowPodsOfSeveralRanks) {
  if (!HaveHeadroomBinary()) GTEST_SKIP() << kBinary << " not built (operator part)";
  std::ifstream in(kSource + "/configs/cluster-base-8gpu.yaml");  // workers: 4, 64Gi and 1 GPU a rank
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml = text.str();
  const std::string workers = "  workers: 4\n";
  ASSERT_NE(yaml.find(workers), std::string::npos);
  yaml.replace(yaml.find(workers), workers.size(), workers + "  ranksPerPod: 2\n");
  const std::string job = WriteTemp("pods_of_two.yaml", yaml);

  Result table = RunHeadroom("plan " + job);
  ASSERT_EQ(table.code, 0) << table.out;
  EXPECT_NE(table.out.find("layout: 2 pods x 2 ranks; each pod requests 128 GiB of memory and 2 GPU(s)"),
            std::string::npos)
      << table.out;
  Result json = RunHeadroom("plan " + job + " --json --workers 2");
  ASSERT_EQ(json.code, 0) << json.out;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["pods"], 1);
  EXPECT_EQ(j["ranks_per_pod"], 2);

  Result render = RunHeadroom("render " + job);
  ASSERT_EQ(render.code, 0) << render.out;
  EXPECT_EQ(render.out.rfind("# addition-base: 4 workers as 2 pods x 2 ranks\n", 0), 0u) << render.out;
  size_t pods = 0;
  for (size_t at = 0; (at = render.out.find("\nkind: Pod\n", at)) != std::string::npos; ++at) ++pods;
  EXPECT_EQ(pods, 2u) << render.out;
  EXPECT_NE(render.out.find("name: addition-base-worker-2\n"), std::string::npos) << render.out;
  EXPECT_NE(render.out.find("nvidia.com/gpu: \"2\""), std::string::npos) << render.out;
}

TEST(PlanCliTest, InvalidJobExitsTwoWithPaths) {
  if (!HaveHeadroomBinary()) GTEST_SKIP() << kBinary << " not built (operator part)";
  std::string path =
      WriteTemp("bad_job.yaml", "apiVersion: headroom.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: x}\n"
                                "spec:\n  grpo: {groupSize: 1}\n");
  Result r = RunHeadroom("plan " + path);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("spec.grpo.groupSize"), std::string::npos) << r.out;
}

}  // namespace
