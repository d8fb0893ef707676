// The end of a `headroom run`: what happened, for a person (PrintSummary) and for a
// program (`--summary FILE`, docs/design.md):
//   {"steps","restarts","reshards","oom_kills","steps_lost","final_reward","wall_seconds",
//    "actions":[{"step","type","reason"}]}
// exactly those keys, and for a spec.model.path job "export": the Hugging Face directory
// it wrote at its end (CHECKPOINT_DIR/hf-export, core/hf/hf_export.h), null when it did
// not finish; final_reward is null when no step finished.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "operator/runtime/job_status.h"

namespace headroom::local {

struct RunSummary {
  std::string job_name;
  std::string phase;                 // Succeeded | Failed | Suspended
  std::string message;               // why it ended that way
  int64_t steps = 0;                 // newest step completed
  int64_t total_steps = 0;
  int restarts = 0;
  int reshards = 0;
  int oom_kills = 0;                 // kernel OOM kills and CUDA out-of-memory exits
  int gpu_oom_kills = 0;             // of which CUDA out of memory (printed, not in the JSON)
  int64_t steps_lost = 0;
  std::optional<double> final_reward;
  double wall_seconds = 0;
  std::vector<runtime::ActionRecord> actions;
  std::string workdir, trace_csv, chart_svg;  // where the files are
  // The fine-tuned model in Hugging Face layout: unset for a job without spec.model.path
  // (no "export" key), "" when it wrote none (null), else the directory.
  std::optional<std::string> export_dir;

  static RunSummary From(const runtime::JobStatus& status, const std::string& job_name, double wall_seconds);
  std::string ToJson() const;        // the --summary document, one object, pretty-printed
  void Print(std::ostream& out) const;
};

}  // namespace headroom::local
