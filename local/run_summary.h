// The end of a `headroom run`: what happened, for a person (PrintSummary) and for a
// program (`--summary FILE`, docs/design.md):
//   {"steps","restarts","reshards","oom_kills","steps_lost","final_reward","wall_seconds",
//    "actions":[{"step","type","reason"}]}
// exactly those keys, and for a spec.model.path job "export": the Hugging Face directory
// it wrote at its end (CHECKPOINT_DIR/hf-export, core/hf/hf_export.h), null when it did
// not finish; final_reward is null when no step finished; and for a job with a held-out set
// "heldout": {"problems","accuracy_before","accuracy_after","step_after","answers":
// [{"question","before","before_correct","after","after_correct"}]} (accuracy_before null
// when the starting model was not measured, as a checkpoint from before that lacks it;
// answers: the same held-out questions before and after training, null where a side is
// missing).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/protocol/step_record.h"
#include "operator/runtime/job_status.h"

namespace headroom::local {

struct RunSummary {
  std::string job_name;
  std::string phase;    // Succeeded | Failed | Suspended
  std::string message;  // why it ended that way
  int64_t steps = 0;    // newest step completed
  int64_t total_steps = 0;
  int restarts = 0;
  int reshards = 0;
  int oom_kills = 0;      // kernel OOM kills and CUDA out-of-memory exits
  int gpu_oom_kills = 0;  // of which CUDA out of memory (printed, not in the JSON)
  int64_t steps_lost = 0;
  std::optional<double> final_reward;
  double wall_seconds = 0;
  std::vector<runtime::ActionRecord> actions;
  std::string workdir, trace_csv, chart_svg;  // where the files are
  // The fine-tuned model in Hugging Face layout: unset for a job without spec.model.path
  // (no "export" key), "" when it wrote none (null), else the directory.
  std::optional<std::string> export_dir;
  // Held-out accuracy (fraction answered exactly right), rank 0's: before the first step and
  // at the newest evaluation; problems 0 when the job has no held-out set or none was scored.
  struct HeldOut {
    int64_t problems = 0;
    std::optional<double> accuracy_before, accuracy_after;
    int64_t step_after = 0;  // the step of accuracy_after
    std::vector<protocol::HeldOutAnswer> answers_before, answers_after;
  } heldout;
  std::string training_svg;  // training_chart.h's picture, "" when none was written

  // Fills `heldout` from the run's step records (every rank and generation, in order).
  void AddHeldOut(const std::vector<protocol::StepRecord>& records);

  static RunSummary From(const runtime::JobStatus& status, const std::string& job_name, double wall_seconds);
  std::string ToJson() const;  // the --summary document, one object, pretty-printed
  void Print(std::ostream& out) const;
};

}  // namespace headroom::local
