// What a local run shows of the learning itself: held-out accuracy in the summary (before
// -> after, with a few answers) and its JSON, the training chart (training.svg), and the
// progress view's held-out lines.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "local/progress_view.h"
#include "local/run_summary.h"
#include "local/training_chart.h"

namespace headroom::local {
namespace {

protocol::StepRecord Rec(int generation, int rank, int64_t step, double reward) {
  protocol::StepRecord r;
  r.generation = generation;
  r.rank = rank;
  r.step = step;
  r.reward_mean = reward;
  return r;
}

protocol::StepRecord Evaluated(protocol::StepRecord r, double accuracy, std::vector<protocol::HeldOutAnswer> answers) {
  r.heldout_accuracy = accuracy;
  r.heldout_reward = accuracy;
  r.heldout_problems = 200;
  r.heldout_answers = std::move(answers);
  return r;
}

protocol::StepRecord First(protocol::StepRecord r, double accuracy, std::vector<protocol::HeldOutAnswer> answers) {
  r.heldout_accuracy_before = accuracy;
  r.heldout_problems_before = 200;
  r.heldout_answers_before = std::move(answers);
  return r;
}

// A fresh run of 4 steps, evaluated before step 1 and at steps 2 and 4; rank 1 evaluates
// its own share too, which the summary must not take for rank 0's.
std::vector<protocol::StepRecord> FreshRun() {
  return {First(Rec(1, 0, 1, 0.2), 0.31, {{"What is 2 + 2?", "5", false}, {"Add 1 and 3.", "4", true}}),
          Rec(1, 1, 1, 0.9),
          Evaluated(Rec(1, 0, 2, 0.4), 0.5, {{"What is 2 + 2?", "4", true}, {"Add 1 and 3.", "4", true}}),
          Evaluated(Rec(1, 1, 2, 0.9), 0.99, {{"rank 1's question", "0", false}}),
          Rec(1, 0, 3, 0.6),
          Evaluated(Rec(1, 0, 4, 0.7), 0.74,
                    {{"What is 2 + 2?", "4", true}, {"Add 1 and 3.", "13", false}, {"Compute 5 + 5.", "10", true}})};
}

RunSummary Summary(const std::vector<protocol::StepRecord>& records) {
  runtime::JobStatus st;
  st.phase = runtime::JobPhase::kSucceeded;
  st.step = 4;
  st.total_steps = 4;
  RunSummary s = RunSummary::From(st, "addition", 3);
  s.AddHeldOut(records);
  return s;
}

TEST(RunSummaryHeldOut, PrintsAccuracyBeforeAndAfterAndTheAnswersOfBoth) {
  RunSummary s = Summary(FreshRun());
  s.training_svg = "/runs/addition/training.svg";
  std::ostringstream text;
  s.Print(text);
  EXPECT_NE(text.str().find("  held-out accuracy 31% -> 74% (200 problems)\n"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("\"What is 2 + 2?\"\n      \"5\" wrong -> \"4\" right\n"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("\"Add 1 and 3.\"\n      \"4\" right -> \"13\" wrong\n"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("\"Compute 5 + 5.\"\n      - -> \"10\" right\n"), std::string::npos) << text.str();
  EXPECT_EQ(text.str().find("rank 1's question"), std::string::npos) << "rank 0's answers only";
  EXPECT_NE(text.str().find("  training chart /runs/addition/training.svg\n"), std::string::npos) << text.str();

  const nlohmann::json h = nlohmann::json::parse(s.ToJson())["heldout"];
  EXPECT_EQ(h["problems"], 200);
  EXPECT_EQ(h["accuracy_before"], 0.31);
  EXPECT_EQ(h["accuracy_after"], 0.74);
  EXPECT_EQ(h["step_after"], 4);
  ASSERT_EQ(h["answers"].size(), 3u) << h.dump();
  EXPECT_EQ(h["answers"][0], nlohmann::json::parse(R"({"question":"What is 2 + 2?","before":"5",
      "before_correct":false,"after":"4","after_correct":true})"));
  EXPECT_TRUE(h["answers"][2]["before"].is_null());
  EXPECT_TRUE(h["answers"][2]["before_correct"].is_null());
}

TEST(RunSummaryHeldOut, AnUnmeasuredStartHasNoBeforeAndAJobWithoutAHeldOutSetNoKey) {
  std::vector<protocol::StepRecord> resumed = FreshRun();
  resumed.erase(resumed.begin());  // resumed from a checkpoint that lacks the starting score
  const RunSummary s = Summary(resumed);
  EXPECT_TRUE(nlohmann::json::parse(s.ToJson())["heldout"]["accuracy_before"].is_null());
  std::ostringstream text;
  s.Print(text);
  EXPECT_NE(text.str().find("  held-out accuracy - -> 74% (200 problems; "), std::string::npos) << text.str();

  const RunSummary none = Summary({Rec(1, 0, 1, 0.5), Rec(1, 0, 2, 0.6)});
  EXPECT_FALSE(nlohmann::json::parse(none.ToJson()).contains("heldout"));
  std::ostringstream plain;
  none.Print(plain);
  EXPECT_EQ(plain.str().find("held-out"), std::string::npos) << plain.str();
}

TEST(RunSummaryHeldOut, AJobStoppedEarlySaysWhichStepItsLastEvaluationWas) {
  std::vector<protocol::StepRecord> records = FreshRun();
  records.pop_back();  // drained after step 3: the newest evaluation is step 2's
  RunSummary s = Summary(records);
  s.steps = 3;
  std::ostringstream text;
  s.Print(text);
  EXPECT_NE(text.str().find("  held-out accuracy 31% -> 50% (200 problems, at step 2)\n"), std::string::npos)
      << text.str();
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

TEST(TrainingChart, RewardPerGenerationAccuracyAtEachEvaluationAndActionsAsOnTheMemoryChart) {
  std::vector<protocol::StepRecord> records = FreshRun();
  // A restart after step 3 redoes step 4 in generation 2.
  records.pop_back();
  records.push_back(Evaluated(Rec(2, 0, 4, 0.8), 0.74, {}));
  EXPECT_EQ(HeldOutAccuracyByStep(records), (std::vector<std::pair<int64_t, double>>{{0, 0.31}, {2, 0.5}, {4, 0.74}}));
  TrainingChartInput in;
  in.title = "addition <guard on>";
  in.records = records;
  in.actions = {{3, runtime::ActionType::kRestart, "leak", ""},
                {3, runtime::ActionType::kRestartAfterOOMKill, "x", ""}};
  in.total_steps = 4;
  const std::string svg = RenderTrainingChartSvg(in);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_NE(svg.find("addition &lt;guard on&gt;"), std::string::npos);
  EXPECT_EQ(Count(svg, "<title>reward, generation "), 2u) << "a line per generation";
  EXPECT_EQ(Count(svg, "<circle"), 3u + 1u) << "a point per evaluation, and the legend's";
  for (const char* label : {">31%<", ">50%<", ">74%<"}) EXPECT_NE(svg.find(label), std::string::npos) << label;
  // The same marks the memory chart draws.
  EXPECT_NE(svg.find("restart @3"), std::string::npos);
  EXPECT_NE(svg.find("OOM kill in step 4"), std::string::npos);
  EXPECT_NE(svg.find("guard action"), std::string::npos);

  in.records = {Rec(1, 0, 1, 0.5)};
  EXPECT_NE(RenderTrainingChartSvg(in).find("no held-out set"), std::string::npos);
}

TEST(ProgressViewHeldOut, PrintsEachEvaluationOfRankZeroOnItsOwnLine) {
  const std::vector<protocol::StepRecord> records = FreshRun();
  EXPECT_EQ(HeldOutLines(records[0]), "held-out accuracy 31.0% before the first step (200 problems)\n");
  EXPECT_EQ(HeldOutLines(records[2]), "step 2: held-out accuracy 50.0% (200 problems)\n");
  EXPECT_EQ(HeldOutLines(records[3]), "") << "rank 1";
  EXPECT_EQ(HeldOutLines(records[4]), "");
  for (const bool terminal : {false, true}) {
    std::ostringstream out;
    ProgressView view(out, terminal, "addition");
    runtime::JobStatus st;
    st.generation = 1;
    st.total_steps = 4;
    st.heldout_accuracy = 0.74;
    view.Update(st, records);
    EXPECT_NE(out.str().find("held-out accuracy 31.0% before the first step"), std::string::npos) << out.str();
    EXPECT_NE(out.str().find("step 4: held-out accuracy 74.0% (200 problems)\n"), std::string::npos) << out.str();
    if (terminal) {
      EXPECT_NE(out.str().find("held-out 74.0%"), std::string::npos) << "the block's first line";
    }
  }
}

}  // namespace
}  // namespace headroom::local
