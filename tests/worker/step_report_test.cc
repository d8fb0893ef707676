// The step record assembled from the phases' values (worker/train/step_report.h): every key
// comes from the phase that reported it, each phase fills exactly its keys, and a phase
// that did not report leaves its keys at the record's defaults.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "worker/train/step_report.h"

namespace headroom::worker {
namespace {

// Every value differs from its default and from every other one, so a key filled from the
// wrong phase or the wrong field shows. Fractions are exact in binary: compared with ==.
StepReport EveryPhaseReported() {
  StepReport r;
  StepResult& t = r.training;
  t.step = 6;
  t.reward_mean = 0.625;
  t.exact_fraction = 0.375;
  t.loss = -0.25;
  t.kl = 0.0625;
  t.clip_fraction = 0.125;
  t.grad_norm = 1.75;
  t.sequences = 16;
  t.tokens = 1024;
  t.generated_tokens = 300;
  t.update_sequences = 12;
  t.rollout_seconds = 2.5;
  t.logprob_seconds = 0.5;
  t.update_seconds = 3.25;
  StepMeasurement& m = r.measured;
  m.memory.host_bytes = 1000;
  m.memory.host_peak_bytes = 1500;
  m.memory.host_limit_bytes = 4000;
  m.memory.gpu.present = true;
  m.memory.gpu.allocated_bytes = 2000;
  m.memory.gpu.reserved_bytes = 2500;
  m.memory.gpu.peak_bytes = 3000;
  m.memory.gpu.allocated_peak_bytes = 2700;
  m.memory.gpu.total_bytes = 8000;
  m.memory.gpu.alloc_retries = 3;
  m.seconds = 8;
  m.world_size = 4;
  m.rank = 3;
  m.micro_batch_size = 8;
  r.micro_batch_tokens = 1024;
  r.next_step_tokens = 2048;
  r.dataset = DatasetState{"train.jsonl", "0123456789abcdef", 5, 2, 17};
  r.held_out = HeldOutScore{0.875, 0.5, 40, {{"What is 2 + 2?", "4", true}}};
  r.held_out_before = HeldOutScore{0.5, 0.25, 40, {{"What is 2 + 2?", "5", false}}};
  GuardVerdict verdict;
  verdict.decision.action = guard::DecisionAction::kRestart;
  verdict.forecast.host.steps_to_limit = 7;
  verdict.forecast.host.steps_to_threshold = 4;
  verdict.forecast.host.growth_bytes_per_step = 96;
  verdict.forecast.gpu.steps_to_limit = 9;
  verdict.forecast.gpu.steps_to_threshold = 6;
  verdict.forecast.gpu.growth_bytes_per_step = 48;
  r.guard = verdict;
  CheckpointSaveStats saved;
  saved.step = 7;
  saved.total_bytes = 123456;
  saved.bytes_written = 30864;
  saved.seconds = 1.5;
  r.checkpoint = saved;
  return r;
}

TEST(StepReportTest, EveryKeyCarriesTheValueItsPhaseReported) {
  const StepReport r = EveryPhaseReported();
  const protocol::StepRecord rec = AssembleStepRecord(r);
  EXPECT_EQ(rec.step, 7) << "records count finished steps";
  EXPECT_EQ(rec.reward_mean, 0.625);
  EXPECT_EQ(rec.exact_fraction, 0.375);
  EXPECT_EQ(rec.loss, -0.25);
  EXPECT_EQ(rec.kl, 0.0625);
  EXPECT_EQ(rec.clip_fraction, 0.125);
  EXPECT_EQ(rec.grad_norm, 1.75);
  EXPECT_EQ(rec.tokens, 1024);
  EXPECT_EQ(rec.generated_tokens, 300);
  EXPECT_EQ(rec.rollout_seconds, 2.5);
  EXPECT_EQ(rec.update_seconds, 3.25);
  EXPECT_EQ(rec.tokens_per_second, 128) << "the step's tokens over its measured seconds";
  EXPECT_EQ(rec.host_bytes, 1000);
  EXPECT_EQ(rec.host_peak_bytes, 1500);
  EXPECT_EQ(rec.host_limit_bytes, 4000);
  EXPECT_EQ(rec.gpu_allocated_bytes, 2000);
  EXPECT_EQ(rec.gpu_reserved_bytes, 2500);
  EXPECT_EQ(rec.gpu_peak_bytes, 3000);
  EXPECT_EQ(rec.gpu_total_bytes, 8000);
  EXPECT_EQ(rec.gpu_alloc_retries, 3);
  EXPECT_EQ(rec.step_seconds, 8);
  EXPECT_EQ(rec.world_size, 4);
  EXPECT_EQ(rec.rank, 3);
  EXPECT_EQ(rec.micro_batch_size, 8);
  EXPECT_EQ(rec.next_step_tokens, 2048);
  EXPECT_EQ(rec.micro_batch_tokens, 1024);
  EXPECT_EQ(rec.epoch, 2);
  EXPECT_EQ(rec.cursor, 17);
  EXPECT_EQ(rec.prompts_filtered, 5);
  EXPECT_EQ(rec.heldout_reward, 0.875);
  EXPECT_EQ(rec.heldout_problems, 40);
  EXPECT_EQ(rec.heldout_accuracy, 0.5) << "the exact fraction, not the reward";
  EXPECT_EQ(rec.heldout_answers, (std::vector<protocol::HeldOutAnswer>{{"What is 2 + 2?", "4", true}}));
  EXPECT_EQ(rec.heldout_accuracy_before, 0.25);
  EXPECT_EQ(rec.heldout_problems_before, 40);
  EXPECT_EQ(rec.heldout_answers_before, (std::vector<protocol::HeldOutAnswer>{{"What is 2 + 2?", "5", false}}));
  EXPECT_EQ(rec.guard_action, "restart");
  EXPECT_EQ(rec.host_forecast_steps, 7);
  EXPECT_EQ(rec.host_threshold_steps, 4);
  EXPECT_EQ(rec.host_growth_bytes_per_step, 96);
  EXPECT_EQ(rec.gpu_forecast_steps, 9);
  EXPECT_EQ(rec.gpu_threshold_steps, 6);
  EXPECT_EQ(rec.gpu_growth_bytes_per_step, 48);
  EXPECT_EQ(rec.checkpoint_bytes, 123456);
  EXPECT_EQ(rec.checkpoint_seconds, 1.5);
}

// The keys whose values differ between two records' JSON lines.
std::set<std::string> KeysThatDiffer(const protocol::StepRecord& a, const protocol::StepRecord& b) {
  const nlohmann::json ja = nlohmann::json::parse(a.ToJson()), jb = nlohmann::json::parse(b.ToJson());
  std::set<std::string> out;
  for (const auto& [key, value] : ja.items()) {
    if (!jb.contains(key) || jb.at(key) != value) out.insert(key);  // answer lists are left out when empty
  }
  return out;
}

TEST(StepReportTest, EachPhaseFillsExactlyItsKeysAndTogetherTheyFillEveryKey) {
  struct Phase {
    std::string name;
    std::function<void(StepReport&)> forget;  // the report as if the phase had not reported
    std::set<std::string> keys;
  };
  const std::vector<Phase> phases = {
      {"training",
       [](StepReport& r) { r.training = {}; },
       {"step", "reward_mean", "exact_fraction", "loss", "kl", "clip_fraction", "grad_norm", "tokens",
        "generated_tokens", "rollout_seconds", "update_seconds", "tokens_per_second"}},
      {"measurement",
       [](StepReport& r) { r.measured = {}; },
       {"host_bytes", "host_peak_bytes", "host_limit_bytes", "gpu_allocated_bytes", "gpu_reserved_bytes",
        "gpu_peak_bytes", "gpu_total_bytes", "gpu_alloc_retries", "step_seconds", "tokens_per_second", "world_size",
        "rank", "micro_batch_size"}},
      {"micro-batch tokens",
       [](StepReport& r) { r.micro_batch_tokens = r.next_step_tokens = 0; },
       {"micro_batch_tokens", "next_step_tokens"}},
      {"dataset", [](StepReport& r) { r.dataset.reset(); }, {"epoch", "cursor", "prompts_filtered"}},
      {"held-out",
       [](StepReport& r) { r.held_out.reset(); },
       {"heldout_reward", "heldout_problems", "heldout_accuracy", "heldout_answers"}},
      {"held-out before",
       [](StepReport& r) { r.held_out_before.reset(); },
       {"heldout_accuracy_before", "heldout_problems_before", "heldout_answers_before"}},
      {"guard",
       [](StepReport& r) { r.guard.reset(); },
       {"guard_action", "host_forecast_steps", "host_threshold_steps", "host_growth_bytes_per_step",
        "gpu_forecast_steps", "gpu_threshold_steps", "gpu_growth_bytes_per_step"}},
      {"checkpoint", [](StepReport& r) { r.checkpoint.reset(); }, {"checkpoint_bytes", "checkpoint_seconds"}},
  };
  const StepReport full = EveryPhaseReported();
  const protocol::StepRecord record = AssembleStepRecord(full);
  std::set<std::string> filled;
  for (const Phase& phase : phases) {
    StepReport without = full;
    phase.forget(without);
    EXPECT_EQ(KeysThatDiffer(record, AssembleStepRecord(without)), phase.keys) << phase.name;
    filled.insert(phase.keys.begin(), phase.keys.end());
  }
  std::set<std::string> every_key;
  const nlohmann::json line = nlohmann::json::parse(record.ToJson());
  for (const auto& [key, value] : line.items()) every_key.insert(key);
  EXPECT_EQ(filled, every_key) << "a key no phase reports";
}

TEST(StepReportTest, PhasesThatDidNotReportLeaveTheRecordsDefaults) {
  StepReport r = EveryPhaseReported();
  r.dataset.reset();
  r.held_out.reset();
  r.held_out_before.reset();
  r.guard.reset();
  r.checkpoint.reset();
  const protocol::StepRecord rec = AssembleStepRecord(r);
  const protocol::StepRecord defaults;
  EXPECT_EQ(rec.epoch, defaults.epoch);
  EXPECT_EQ(rec.cursor, defaults.cursor);
  EXPECT_EQ(rec.prompts_filtered, defaults.prompts_filtered);
  EXPECT_EQ(rec.heldout_reward, -1) << "not evaluated this step";
  EXPECT_EQ(rec.heldout_problems, 0);
  EXPECT_EQ(rec.heldout_accuracy, -1);
  EXPECT_EQ(rec.heldout_accuracy_before, -1) << "only a fresh run's first record";
  EXPECT_TRUE(rec.heldout_answers.empty());
  EXPECT_FALSE(nlohmann::json::parse(rec.ToJson()).contains("heldout_answers")) << "left out when empty";
  EXPECT_EQ(rec.guard_action, "none");
  EXPECT_EQ(rec.host_forecast_steps, -1);
  EXPECT_EQ(rec.gpu_threshold_steps, -1);
  EXPECT_EQ(rec.checkpoint_bytes, 0) << "no save this step";
  EXPECT_EQ(rec.checkpoint_seconds, 0);
}

}  // namespace
}  // namespace headroom::worker
