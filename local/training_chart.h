// The training curves of a run, beside its memory chart (memory_chart.h), because what
// people look at first in TensorBoard or W&B is whether the model is learning: the mean
// reward of each step's rollouts (rank 0, one line per generation, so a restart starts a
// new line where the run resumed) and the held-out accuracy at each evaluation (the
// fraction of the held-out problems answered exactly right, greedy: before the first
// step, at step 0, and at every checkpoint), as points joined by a line and labelled.
// Every action is marked as on the memory chart (DrawActionMarks). Both series are
// fractions, on one axis from 0 to 100%.
//
// Plain SVG 1.1 written by hand: no dependencies, opens in any browser.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/protocol/step_record.h"
#include "operator/runtime/job_status.h"

namespace headroom::local {

struct TrainingChartInput {
  std::string title;
  std::vector<protocol::StepRecord> records;  // every rank, every generation
  std::vector<runtime::ActionRecord> actions;
  int64_t total_steps = 0;
};

// The held-out evaluations the records carry, rank 0's, by step (0 = before the first
// step); a step evaluated again after a restart keeps its newest value.
std::vector<std::pair<int64_t, double>> HeldOutAccuracyByStep(const std::vector<protocol::StepRecord>& records);

std::string RenderTrainingChartSvg(const TrainingChartInput& input);

}  // namespace headroom::local
