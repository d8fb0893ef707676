// What a local run leaves behind and shows: the memory series (replay's trace format), the
// summary JSON (docs/design.md's keys), the SVG chart, and the progress view on and off a
// terminal.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "local/memory_chart.h"
#include "local/memory_series.h"
#include "local/progress_view.h"
#include "local/run_summary.h"
#include "tests/local/local_test_support.h"

namespace headroom::local {
namespace {

protocol::StepRecord Rec(int generation, int rank, int64_t step, int64_t host, int64_t gpu = 0) {
  protocol::StepRecord r;
  r.generation = generation;
  r.rank = rank;
  r.step = step;
  r.host_bytes = host;
  r.host_peak_bytes = host + 10;
  r.host_limit_bytes = 1000;
  r.gpu_reserved_bytes = gpu;
  r.gpu_total_bytes = gpu ? 2000 : 0;
  r.tokens = 64;
  r.reward_mean = 0.5;
  return r;
}

TEST(MemorySeries, TraceHasTheWorstRankPerStepAndRepeatsRedoneSteps) {
  MemorySeries s;
  s.Add(Rec(1, 0, 1, 100));
  s.Add(Rec(1, 1, 1, 300));
  s.Add(Rec(1, 0, 2, 150));
  s.Add(Rec(2, 0, 2, 50));  // redone after a crash
  const auto rows = s.WorstPerStep();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].host_bytes, 300);
  EXPECT_EQ(rows[0].host_peak_bytes, 310);
  EXPECT_EQ(rows[2].step, 2);
  EXPECT_EQ(rows[2].generation, 2);
  testing::TempDir dir;
  s.WriteCsv(dir.path() + "/m.csv", dir.path() + "/r.csv");
  EXPECT_EQ(testing::ReadAll(dir.path() + "/m.csv"),
            // docs/design.md's trace columns
            std::string("step,host_bytes,gpu_bytes,host_peak_bytes,gpu_peak_bytes,tokens,host_limit_bytes,"
                        "gpu_limit_bytes\n") +
                "1,300,0,310,0,64,1000,0\n2,150,0,160,0,64,1000,0\n2,50,0,60,0,64,1000,0\n");
  const std::string by_rank = testing::ReadAll(dir.path() + "/r.csv");
  EXPECT_EQ(by_rank.rfind("generation,rank,step,host_bytes", 0), 0u);
  EXPECT_EQ(std::count(by_rank.begin(), by_rank.end(), '\n'), 5);
}

TEST(RunSummary, JsonHasExactlyTheDesignKeysPlusAModelPathJobsExport) {
  runtime::JobStatus st;
  st.phase = runtime::JobPhase::kSucceeded;
  st.step = 40;
  st.restarts = 2;
  st.oom_kills = 1;
  st.steps_lost = 5;
  st.final_reward = 0.75;
  st.actions.push_back({14, runtime::ActionType::kRestart, "leak", "t"});
  RunSummary s = RunSummary::From(st, "drill", 12.5);
  nlohmann::json j = nlohmann::json::parse(s.ToJson());
  EXPECT_EQ(j, nlohmann::json::parse(R"({"steps":40,"restarts":2,"reshards":0,"oom_kills":1,"steps_lost":5,
      "final_reward":0.75,"wall_seconds":12.5,"actions":[{"step":14,"type":"restart","reason":"leak"}]})"));
  // A spec.model.path job's Hugging Face export: the path in the JSON and a line of its own,
  // null when it wrote none.
  RunSummary unfinished = s;
  unfinished.export_dir = "";
  EXPECT_TRUE(nlohmann::json::parse(unfinished.ToJson())["export"].is_null());
  RunSummary exported = s;
  exported.export_dir = "/runs/drill/checkpoints/hf-export";
  EXPECT_EQ(nlohmann::json::parse(exported.ToJson())["export"], "/runs/drill/checkpoints/hf-export");
  std::ostringstream exported_text;
  exported.Print(exported_text);
  EXPECT_NE(exported_text.str().find("  export        /runs/drill/checkpoints/hf-export\n"), std::string::npos)
      << exported_text.str();
  st.final_reward.reset();
  EXPECT_TRUE(nlohmann::json::parse(RunSummary::From(st, "drill", 1).ToJson())["final_reward"].is_null());
  std::ostringstream text;
  s.Print(text);
  EXPECT_NE(text.str().find("OOM kills     1"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("step 14  restart: leak"), std::string::npos) << text.str();
}

TEST(RunSummary, PrintsEveryActionTheJsonListsOnOneLineEach) {
  runtime::JobStatus st;
  st.phase = runtime::JobPhase::kSucceeded;
  st.oom_kills = 2;
  st.gpu_oom_kills = 1;
  // Reasons quoting worker output: a newline, a carriage return, an escape sequence.
  st.actions = {{3, runtime::ActionType::kRestartAfterCrash, "rank 0 crashed: boom\nframe #1: x", "t"},
                {5, runtime::ActionType::kRestartAfterGpuOOM, "rank 0 ran out of GPU memory\r", "t"},
                {7, runtime::ActionType::kRestartAfterCrash, "\x1b[2Krank 1 crashed", "t"},
                {9, runtime::ActionType::kRestart, "leak", "t"}};
  const RunSummary s = RunSummary::From(st, "drill", 1);
  std::ostringstream text;
  s.Print(text);
  const nlohmann::json j = nlohmann::json::parse(s.ToJson());
  ASSERT_EQ(j["actions"].size(), 4u);
  std::istringstream lines(text.str());
  std::vector<std::string> action_lines;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("    step ", 0) == 0) action_lines.push_back(line);
    EXPECT_EQ(line.find('\r'), std::string::npos) << line;
    EXPECT_EQ(line.find('\x1b'), std::string::npos) << line;
  }
  ASSERT_EQ(action_lines.size(), j["actions"].size()) << text.str();
  for (size_t i = 0; i < action_lines.size(); ++i) {
    const std::string want = "    step " + std::to_string(j["actions"][i]["step"].get<int>()) + "  " +
                             j["actions"][i]["type"].get<std::string>() + ": ";
    EXPECT_EQ(action_lines[i].rfind(want, 0), 0u) << action_lines[i];
  }
  EXPECT_NE(text.str().find("actions       4:"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("OOM kills     2 (1 GPU out of memory)"), std::string::npos) << text.str();
}

TEST(MemoryChart, DrawsLinesPerRankAndGenerationThresholdAndLabelledActions) {
  MemoryChartInput in;
  in.title = "drill <guard on>";
  in.records = {Rec(1, 0, 1, 500), Rec(1, 0, 2, 800), Rec(2, 0, 3, 100, 1500), Rec(2, 0, 4, 200, 1600)};
  in.actions = {{2, runtime::ActionType::kRestart, "leak", ""},
                {3, runtime::ActionType::kRestartAfterOOMKill, "kernel", ""}};
  in.total_steps = 10;
  in.host_limit_bytes = 1000;
  in.host_threshold = 0.9;
  const std::string svg = RenderMemoryChartSvg(in);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("drill &lt;guard on&gt;"), std::string::npos);  // escaped
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '\n') > 10, true);
  size_t polylines = 0;
  for (size_t p = svg.find("<polyline"); p != std::string::npos; p = svg.find("<polyline", p + 1)) ++polylines;
  EXPECT_EQ(polylines, 3u);  // host gen 1, host gen 2, GPU gen 2
  EXPECT_NE(svg.find("host threshold 90%"), std::string::npos);
  EXPECT_NE(svg.find("GPU threshold"), std::string::npos);
  EXPECT_NE(svg.find("restart @2"), std::string::npos);
  EXPECT_NE(svg.find("OOM kill in step 4"), std::string::npos);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
}

TEST(ProgressView, PlainLinesOffATerminal) {
  std::ostringstream out;
  ProgressView view(out, /*terminal=*/false, "job");
  runtime::JobStatus st;
  st.generation = 1;
  st.total_steps = 10;
  view.Update(st, {Rec(1, 0, 1, 500), Rec(1, 1, 1, 600)});
  st.actions.push_back({1, runtime::ActionType::kRestart, "leak", ""});
  view.Update(st, {});
  EXPECT_EQ(out.str().find("\x1b["), std::string::npos);  // nothing redrawn
  EXPECT_NE(out.str().find("step 1/10"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("( 50%)"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("[step 1] restart: leak"), std::string::npos) << out.str();
}

TEST(ProgressView, RedrawsABlockInPlaceOnATerminal) {
  std::ostringstream out;
  ProgressView view(out, /*terminal=*/true, "job");
  runtime::JobStatus st;
  st.generation = 1;
  st.total_steps = 10;
  st.step = 1;
  view.Update(st, {Rec(1, 0, 1, 500)});
  const std::string first = out.str();
  EXPECT_NE(first.find("worker 0  host"), std::string::npos) << first;
  EXPECT_NE(first.find(" 50%"), std::string::npos) << first;
  st.actions.push_back({1, runtime::ActionType::kReshard, "state does not fit", ""});
  st.last_action = st.actions.back();
  view.Update(st, {});
  const std::string second = out.str().substr(first.size());
  EXPECT_EQ(second.rfind("\x1b[", 0), 0u) << "the old block is erased first";
  EXPECT_NE(second.find("last action: step 1 reshard"), std::string::npos) << second;
}

}  // namespace
}  // namespace headroom::local
