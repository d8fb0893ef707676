// One line of a worker's step log (docs/design.md, Worker): what one rank measured and
// decided at the end of one step. The worker writes it (its --log file, stdout, and the
// same numbers on /metrics); supervisors read it back (`headroom run` tails the log
// files, the operator scrapes /metrics) and the guard reads its memory part. This is the
// one shape of that record on both sides.
//
// Keys, all written every step: step, reward_mean, loss, kl, host_bytes,
// host_peak_bytes, host_limit_bytes, gpu_allocated_bytes, gpu_reserved_bytes,
// gpu_peak_bytes, gpu_total_bytes, tokens, step_seconds, tokens_per_second (docs/design.md's),
// then next_step_tokens, micro_batch_tokens, world_size, rank, micro_batch_size, exact_fraction,
// clip_fraction, grad_norm, generated_tokens, gpu_alloc_retries, rollout_seconds,
// update_seconds, guard_action, host_forecast_steps, host_threshold_steps,
// host_growth_bytes_per_step, gpu_forecast_steps, gpu_threshold_steps,
// gpu_growth_bytes_per_step, checkpoint_bytes, checkpoint_seconds, epoch, cursor,
// prompts_filtered, heldout_reward, heldout_problems, heldout_accuracy,
// heldout_accuracy_before, heldout_problems_before (headroom's additions, README.md "Step
// log"), and on the records that carry them heldout_answers, heldout_answers_before:
//   tokens              padded tokens the step processed: sequences * (prompt + maxResponse)
//                       — the number memory follows, known before the step runs
//   next_step_tokens    micro_batch_tokens for the next step: what the guard forecasts it
//                       with (0 after the last step)
//   micro_batch_tokens  this step's largest update micro-batch on this rank, known before it
//                       ran: its padded tokens at the planner's activation cost per token of
//                       their length, in full-length-token equivalents
//                       (core/memory/micro_batch_tokens.h). What its activation peak
//                       follows, so what the guard reads as the step's tokens (0 from a
//                       worker that did not write it: then `tokens`)
//   generated_tokens    response tokens actually sampled
//   guard_action        what the worker's memory guard decided after this step ("none", ...)
//   *_forecast_steps    steps until the forecast peak crosses the limit; -1 = not within
//                       the scan / no limit
//   *_threshold_steps   the same for memoryGuard's threshold
//   *_growth_bytes_per_step  the forecaster's trend (0 unless memory is trending)
//   checkpoint_bytes    size of the checkpoint saved after this step, all ranks' files
//                       together; 0 = no save this step
//   checkpoint_seconds  that save, start to commit; 0 = no save this step
//   epoch, cursor       text tasks: where the next unseen prompt lies in the dataset (the
//                       pass over it, 0-based, and the position in that pass's order)
//                       after this step; 0 for generated tasks
//   prompts_filtered    text tasks: dataset records skipped because their prompt is longer
//                       than maxPromptLength; 0 for generated tasks
//   heldout_reward      text tasks with spec.task.dataset.heldOut: the mean reward of greedy
//                       responses to the held-out problems, on the steps that evaluate them
//                       (checkpoint cadence and the last step); -1 on the others
//   heldout_problems    how many held-out problems that mean is over; 0 when not evaluated
//   heldout_accuracy    the fraction of those problems answered exactly right (the reward
//                       without its format weight equal to 1), same steps; -1 on the others
//   heldout_accuracy_before  the same for the starting model, measured before the job's
//                       first step: on the first record of every run (a resumed run reads
//                       it from its checkpoint); -1 on every other record
//   heldout_problems_before  how many problems that is over; 0 on the other records
//   heldout_answers     on evaluated steps: the greedy answers to the first held-out
//                       problems this rank scored (at most kHeldOutAnswers), each
//                       {"question","response","correct"}; absent when empty
//   heldout_answers_before  the same for the starting model, beside heldout_accuracy_before
//
// Reading contract: ParseStepLogLine() accepts one JSON object with at least an integer
// "step"; every other key is optional (absent numbers keep their defaults) and unknown
// keys are ignored, so the worker may add keys without breaking a supervisor. A line that
// is not a step record (a banner, a half-written line, an object without "step") yields
// std::nullopt and the explanation in *why when why is non-null. Before its first step a
// worker that fetches its model also writes model-fetch lines into the step log
// (model_fetch_record.h); they carry no "step" and so yield std::nullopt here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace headroom::protocol {

// One held-out question and the greedy response the model gave it.
struct HeldOutAnswer {
  std::string question;  // the dataset's prompt, before the chat format
  std::string response;  // the response text, up to the stop token, special tokens skipped
  bool correct = false;  // the reward's answer matches the reference

  bool operator==(const HeldOutAnswer&) const = default;
};
inline constexpr int kHeldOutAnswers = 3;  // what a record carries, and the summary shows

struct StepRecord {
  int64_t step = 0;  // finished steps: the number a checkpoint of this state carries
  double reward_mean = 0, exact_fraction = 0, loss = 0, kl = 0, clip_fraction = 0, grad_norm = 0;
  int64_t host_bytes = 0;        // end-of-step working set
  int64_t host_peak_bytes = 0;   // peak during the step
  int64_t host_limit_bytes = 0;  // the limit the worker saw (cgroup or soft limit); 0 = none
  int64_t gpu_allocated_bytes = 0, gpu_reserved_bytes = 0, gpu_peak_bytes = 0;
  int64_t gpu_total_bytes = 0;  // device capacity: the GPU "limit"; 0 = no GPU
  int64_t gpu_alloc_retries = 0;
  int64_t tokens = 0, next_step_tokens = 0, micro_batch_tokens = 0, generated_tokens = 0;
  double step_seconds = 0, tokens_per_second = 0, rollout_seconds = 0, update_seconds = 0;
  int world_size = 1, rank = 0;
  int64_t micro_batch_size = 0;
  std::string guard_action = "none";
  int host_forecast_steps = -1, host_threshold_steps = -1;
  double host_growth_bytes_per_step = 0;
  int gpu_forecast_steps = -1, gpu_threshold_steps = -1;
  double gpu_growth_bytes_per_step = 0;
  int64_t checkpoint_bytes = 0;
  double checkpoint_seconds = 0;
  int64_t epoch = 0, cursor = 0, prompts_filtered = 0;
  double heldout_reward = -1;
  int64_t heldout_problems = 0;
  double heldout_accuracy = -1, heldout_accuracy_before = -1;
  int64_t heldout_problems_before = 0;
  // Written after the keys above, and only when non-empty.
  std::vector<HeldOutAnswer> heldout_answers, heldout_answers_before;

  // Not in the JSON: which launch of the job produced the record, set by the supervisor
  // that read it.
  int generation = 0;

  std::string ToJson() const;  // one line, no trailing newline; keys in the order above
  // The guard's view of it, and its forecast fields: core/guard/step_record_memory.h.
};

std::optional<StepRecord> ParseStepLogLine(const std::string& line, std::string* why = nullptr);

// A whole step log (one rank's --log file): every line a record; blank lines and
// model-fetch lines (model_fetch_record.h) skipped.
// Throws std::runtime_error naming the file, the 1-based line and why for any other line.
std::vector<StepRecord> ParseStepLog(const std::string& text, const std::string& source = "step log");
std::vector<StepRecord> ReadStepLogFile(const std::string& path);
// True when `text` looks like a step log rather than a CSV trace (its first non-blank
// character opens a JSON object).
bool LooksLikeStepLog(const std::string& text);

}  // namespace headroom::protocol
