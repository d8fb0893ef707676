#include "operator/runtime/decision_applier.h"

#include <algorithm>

namespace headroom::runtime {

int FittingWorkerCount(const spec::TrainingJobSpec& s, int wanted, int current) {
  const int lo = std::max(1, s.min_workers);
  const int hi = std::max(lo, s.max_workers);
  wanted = std::clamp(wanted, lo, hi);
  if (wanted >= current) {
    for (int n = wanted; n <= hi; ++n) {
      if (spec::WorkerCountFits(s.grpo, n)) return n;
    }
    for (int n = wanted - 1; n > current; --n) {
      if (spec::WorkerCountFits(s.grpo, n)) return n;
    }
  } else {
    for (int n = wanted; n >= lo; --n) {
      if (spec::WorkerCountFits(s.grpo, n)) return n;
    }
  }
  return current;
}

SpecChange ApplyDecision(const spec::TrainingJob& current, const guard::Decision& d) {
  using guard::DecisionAction;
  SpecChange change;
  change.job = current;
  change.type = guard::DecisionActionName(d.action);
  change.reason = d.reason.empty() ? std::string("memory guard: ") + change.type : d.reason;
  spec::TrainingJobSpec& s = change.job.spec;
  const spec::TrainingJobSpec before = s;

  auto fall_back_to_restart = [&](const std::string& why) {
    change.type = "restart";
    change.reason += " (" + why + "; restarting at the same size instead)";
    s = before;
  };

  switch (d.action) {
    case DecisionAction::kFail:
      change.fail = true;
      return change;
    case DecisionAction::kNone:
    case DecisionAction::kRestart:
      // A guard stop with nothing to change is a restart: the fresh process gets back
      // whatever memory the old one had leaked.
      change.type = "restart";
      return change;
    default:
      break;
  }

  d.ApplyTo(s);
  if (d.action == DecisionAction::kReshard) {
    const int wanted = d.target_workers.value_or(before.workers * 2);
    const int n = FittingWorkerCount(before, wanted, before.workers);
    if (n == before.workers) {
      fall_back_to_restart("no worker count other than " + std::to_string(before.workers) +
                           " fits within [" + std::to_string(before.min_workers) + ", " +
                           std::to_string(before.max_workers) + "]");
      return change;
    }
    s.workers = n;
    change.reshard = true;
    change.reason += " (workers " + std::to_string(before.workers) + " -> " + std::to_string(n) + ")";
    return change;
  }
  s.workers = before.workers;  // only a reshard changes the size
  if (d.action == DecisionAction::kShrinkMicroBatch) {
    if (!d.target_micro_batch_size) s.grpo.micro_batch_size = before.grpo.micro_batch_size / 2;
    s.grpo.micro_batch_size = std::clamp(s.grpo.micro_batch_size, 1, before.grpo.micro_batch_size);
    if (s.grpo.micro_batch_size == before.grpo.micro_batch_size) {
      fall_back_to_restart("microBatchSize is already " + std::to_string(before.grpo.micro_batch_size));
      return change;
    }
    change.reason += " (microBatchSize " + std::to_string(before.grpo.micro_batch_size) + " -> " +
                     std::to_string(s.grpo.micro_batch_size) + ")";
    return change;
  }
  // disableOffload / enableOffload: when the decision names no flag, off means both off
  // and on means optimizer state to host (the cheaper of the two to move).
  const bool on = d.action == DecisionAction::kEnableOffload;
  if (!d.target_offload_params && !d.target_offload_optimizer) {
    s.sharding.offload_optimizer = on;
    if (!on) s.sharding.offload_params = false;
  }
  if (s.sharding == before.sharding) {
    fall_back_to_restart(std::string("offload is already ") + (on ? "on" : "off"));
    return change;
  }
  change.reason += std::string(" (offloadParams ") + (s.sharding.offload_params ? "true" : "false") +
                   ", offloadOptimizer " + (s.sharding.offload_optimizer ? "true" : "false") + ")";
  return change;
}

}  // namespace headroom::runtime
