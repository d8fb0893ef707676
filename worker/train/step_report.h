// One step as its phases reported it, and the one place that turns that into the step's
// protocol::StepRecord (whose keys and format core/protocol/step_record.h owns).
//
// Each phase returns what it measured or decided as a value; the step loop
// (worker/train/run_worker.cc) collects them in a StepReport, in the order they run:
//
//   phase                      returns              record keys it fills
//   rollout, rewards, update   StepResult           step, reward_mean, exact_fraction, loss,
//     (GrpoTrainer::RunStep)                        kl, clip_fraction, grad_norm, tokens,
//                                                   generated_tokens, rollout_seconds,
//                                                   update_seconds, tokens_per_second
//   telemetry (EndStep)        StepMeasurement      host_*, gpu_*, step_seconds, world_size,
//                                                   rank, micro_batch_size
//   the step's and the next    micro_batch_tokens,  micro_batch_tokens, next_step_tokens
//     step's largest micro-    next_step_tokens
//     batch (known before each runs)
//   dataset position           DatasetState         epoch, cursor, prompts_filtered
//   held-out evaluation        HeldOutScore         heldout_reward, heldout_problems,
//                                                   heldout_accuracy, heldout_answers
//   the evaluation before the  HeldOutScore         heldout_accuracy_before,
//     first step (first record)                     heldout_problems_before,
//                                                   heldout_answers_before
//   guard                      GuardVerdict         guard_action, *_forecast_steps,
//                                                   *_threshold_steps, *_growth_bytes_per_step
//   checkpoint                 CheckpointSaveStats  checkpoint_bytes, checkpoint_seconds
//
// A phase that did not report (no dataset, no evaluation this step, no save) leaves its
// keys at StepRecord's defaults.
#pragma once

#include <cstdint>
#include <optional>

#include "core/guard/decision.h"
#include "core/guard/forecaster.h"
#include "core/protocol/step_record.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/tasks/task.h"
#include "worker/train/grpo_trainer.h"
#include "worker/train/step_telemetry.h"

namespace headroom::worker {

// What the worker's memory guard decided after a step, and the forecast it decided on.
struct GuardVerdict {
  guard::Decision decision;
  guard::Forecast forecast;
};

struct StepReport {
  StepResult training;                            // GrpoTrainer::RunStep (training.step is 0-based)
  StepMeasurement measured;                       // StepTelemetry::EndStep
  int64_t micro_batch_tokens = 0;                 // this step's largest micro-batch (MicroBatchTokensOfStep)
  int64_t next_step_tokens = 0;                   // the same for the next step; 0 after the last step
  std::optional<DatasetState> dataset;            // text tasks: GrpoTrainer::DatasetAfter(finished steps)
  std::optional<HeldOutScore> held_out;           // the steps that evaluate the held-out problems
  std::optional<HeldOutScore> held_out_before;    // the starting model's, on a fresh run's first step
  std::optional<GuardVerdict> guard;              // once the guard judged the step
  std::optional<CheckpointSaveStats> checkpoint;  // a save after this step
};

// The step's record: every key from the phase that reported it (table above); the
// record's step counts finished steps (training.step + 1).
protocol::StepRecord AssembleStepRecord(const StepReport& report);

}  // namespace headroom::worker
