// What a person watching `headroom run` sees while it runs.
//
// On a terminal: a block of a few lines redrawn in place (ANSI cursor-up + clear) at most
// a few times a second — step/total with a bar, reward, each worker's host and GPU memory
// as % of its limit, the forecast (growth per step, steps to the limit), restarts,
// reshards, OOM kills, steps lost, and the last action; every action and notice also
// scrolls above the block as a permanent line.
// Not on a terminal (a pipe, a CI log): plain lines, one per completed step and one per
// action, nothing redrawn.
// Held-out accuracy, when a record brings an evaluation, is a permanent line (HeldOutLines),
// and the block's first line shows the latest.
// A spec.model.hub download (JobStatus::model_fetch) shows as "fetching model REPO@REV:
// X of Y (FILE)": in the block until the generation's first step, as a plain line every
// tenth of the bytes.
#pragma once

#include <chrono>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "operator/runtime/job_status.h"
#include "core/protocol/step_record.h"

namespace headroom::local {

class ProgressView {
 public:
  ProgressView(std::ostream& out, bool terminal, std::string job_name);

  // New step records and the status after reconciling them.
  void Update(const runtime::JobStatus& status, const std::vector<protocol::StepRecord>& new_steps);
  // A one-off message (the backend's cgroup notice, where files are).
  void Notice(const std::string& message);
  // Leaves the last block on screen (terminal) before the summary is printed.
  void Finish(const runtime::JobStatus& status);

 private:
  void Clear();
  void Draw(const runtime::JobStatus& status);
  std::vector<std::string> Block(const runtime::JobStatus& status) const;
  void PrintModelFetch(const runtime::JobStatus& status);  // plain mode: a line per tenth

  std::ostream& out_;
  bool terminal_;
  std::string job_name_;
  int drawn_lines_ = 0;
  size_t actions_shown_ = 0;
  std::map<int, protocol::StepRecord> latest_;  // per rank, current generation
  int generation_ = 0;
  std::string fetch_repo_shown_;  // the model fetch the plain lines last showed, per tenth
  int fetch_tenth_shown_ = -1;
  std::chrono::steady_clock::time_point last_draw_{};
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

// The lines a rank-0 record's held-out evaluations print ("held-out accuracy 29.0% before
// the first step (200 problems)", "step 50: held-out accuracy 41.5% (200 problems)"), each
// ending in a newline; "" for a record that carries none.
std::string HeldOutLines(const protocol::StepRecord& record);
// "512 MiB", "1.5 GiB"
std::string FormatBytes(int64_t bytes);
// "fetching model org/name@main: 12 MiB of 942 MiB (model.safetensors)", or "fetched model
// org/name@main: 942 MiB of 942 MiB" once complete.
std::string ModelFetchLine(const protocol::ModelFetchRecord& fetch);

}  // namespace headroom::local
