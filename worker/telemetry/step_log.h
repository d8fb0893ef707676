// The per-step JSON log (design.md, Worker): one object per line, flushed per step, to
// --log FILE or stdout. The local runtime and tests follow it as it grows.
//
// Keys (all always present): step, reward_mean, loss, kl, host_bytes, host_peak_bytes,
// host_limit_bytes, gpu_allocated_bytes, gpu_reserved_bytes, gpu_peak_bytes,
// gpu_total_bytes, tokens, step_seconds, tokens_per_second, next_step_tokens,
// world_size, rank, micro_batch_size, plus exact_fraction, clip_fraction, grad_norm,
// generated_tokens, gpu_alloc_retries, rollout_seconds, update_seconds,
// guard_action, host_forecast_steps, host_growth_bytes_per_step, checkpoint_bytes,
// checkpoint_seconds.
//   tokens            padded tokens the step processed: sequences * (prompt + maxResponse)
//                     — the number memory follows, known before the step runs
//   next_step_tokens  the same for the next step (what the guard forecasts with)
//   generated_tokens  response tokens actually sampled
//   checkpoint_bytes  size of the checkpoint saved after this step, all ranks' files
//                     together (design.md names no such field; 0 = no save this step)
//   checkpoint_seconds  that save, start to commit (a collective: the same on every rank
//                     up to timing); 0 = no save this step
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace headroom::worker {

struct StepRecord {
  int64_t step = 0;
  double reward_mean = 0, exact_fraction = 0, loss = 0, kl = 0, clip_fraction = 0, grad_norm = 0;
  int64_t host_bytes = 0, host_peak_bytes = 0, host_limit_bytes = 0;
  int64_t gpu_allocated_bytes = 0, gpu_reserved_bytes = 0, gpu_peak_bytes = 0, gpu_total_bytes = 0;
  int64_t gpu_alloc_retries = 0;
  int64_t tokens = 0, next_step_tokens = 0, generated_tokens = 0;
  double step_seconds = 0, tokens_per_second = 0, rollout_seconds = 0, update_seconds = 0;
  int world_size = 1, rank = 0;
  int64_t micro_batch_size = 0;
  std::string guard_action = "none";
  int host_forecast_steps = -1;            // steps until the host limit; -1 = never/unknown
  double host_growth_bytes_per_step = 0;
  int64_t checkpoint_bytes = 0;
  double checkpoint_seconds = 0;

  std::string ToJson() const;  // one line, no trailing newline
};

class StepLogWriter {
 public:
  // path "" or "-" writes to stdout; otherwise appends to the file (a resumed run keeps
  // its earlier lines). Throws std::runtime_error when the file cannot be opened.
  explicit StepLogWriter(const std::string& path);
  ~StepLogWriter();
  StepLogWriter(const StepLogWriter&) = delete;
  StepLogWriter& operator=(const StepLogWriter&) = delete;

  void Write(const StepRecord& record);

 private:
  std::FILE* file_;
  bool owned_;
};

}  // namespace headroom::worker
