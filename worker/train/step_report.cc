#include "worker/train/step_report.h"

#include "core/guard/step_record_memory.h"

namespace headroom::worker {

namespace {

void FillTraining(protocol::StepRecord& rec, const StepResult& r, double step_seconds) {
  rec.step = r.step + 1;
  rec.reward_mean = r.reward_mean;
  rec.exact_fraction = r.exact_fraction;
  rec.loss = r.loss;
  rec.kl = r.kl;
  rec.clip_fraction = r.clip_fraction;
  rec.grad_norm = r.grad_norm;
  rec.tokens = r.tokens;
  rec.generated_tokens = r.generated_tokens;
  rec.rollout_seconds = r.rollout_seconds;
  rec.update_seconds = r.update_seconds;
  rec.tokens_per_second = step_seconds > 0 ? static_cast<double>(r.tokens) / step_seconds : 0;
}

void FillMeasurement(protocol::StepRecord& rec, const StepMeasurement& m) {
  rec.host_bytes = m.memory.host_bytes;
  rec.host_peak_bytes = m.memory.host_peak_bytes;
  rec.host_limit_bytes = m.memory.host_limit_bytes;
  rec.gpu_allocated_bytes = m.memory.gpu.allocated_bytes;
  rec.gpu_reserved_bytes = m.memory.gpu.reserved_bytes;
  rec.gpu_peak_bytes = m.memory.gpu.peak_bytes;
  rec.gpu_total_bytes = m.memory.gpu.total_bytes;
  rec.gpu_alloc_retries = m.memory.gpu.alloc_retries;
  rec.step_seconds = m.seconds;
  rec.world_size = m.world_size;
  rec.rank = m.rank;
  rec.micro_batch_size = m.micro_batch_size;
}

}  // namespace

protocol::StepRecord AssembleStepRecord(const StepReport& report) {
  protocol::StepRecord rec;
  FillTraining(rec, report.training, report.measured.seconds);
  FillMeasurement(rec, report.measured);
  rec.next_step_tokens = report.next_step_tokens;
  rec.micro_batch_tokens = report.micro_batch_tokens;
  if (report.dataset) {
    rec.epoch = report.dataset->epoch;
    rec.cursor = report.dataset->cursor;
    rec.prompts_filtered = report.dataset->prompts_filtered;
  }
  if (report.held_out) {
    rec.heldout_reward = report.held_out->reward_mean;
    rec.heldout_problems = report.held_out->problems;
    rec.heldout_accuracy = report.held_out->exact_fraction;
    rec.heldout_answers = report.held_out->answers;
  }
  if (report.held_out_before) {
    rec.heldout_accuracy_before = report.held_out_before->exact_fraction;
    rec.heldout_problems_before = report.held_out_before->problems;
    rec.heldout_answers_before = report.held_out_before->answers;
  }
  if (report.guard) {
    rec.guard_action = guard::DecisionActionName(report.guard->decision.action);
    guard::SetForecastFields(report.guard->forecast, rec);
  }
  if (report.checkpoint) {
    rec.checkpoint_bytes = static_cast<int64_t>(report.checkpoint->total_bytes);
    rec.checkpoint_seconds = report.checkpoint->seconds;
  }
  return rec;
}

}  // namespace headroom::worker
