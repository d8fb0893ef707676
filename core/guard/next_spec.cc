#include "core/guard/next_spec.h"

#include <algorithm>

#include "core/guard/planner.h"

namespace headroom::guard {

namespace {

std::string Flag(bool on) { return on ? "true" : "false"; }

}  // namespace

NextSpec ApplyDecision(const spec::TrainingJob& current, const Decision& d) {
  NextSpec next;
  next.job = current;
  next.applied = d.action;
  next.reason = d.reason.empty() ? std::string("memory guard: ") + DecisionActionName(d.action) : d.reason;
  const spec::TrainingJobSpec& before = current.spec;
  spec::TrainingJobSpec& s = next.job.spec;

  auto fall_back_to_restart = [&](const std::string& why) {
    next.applied = DecisionAction::kRestart;
    next.reason += " (" + why + "; restarting at the same size instead)";
    s = before;
    return next;
  };

  switch (d.action) {
    case DecisionAction::kFail: return next;
    case DecisionAction::kNone:
    case DecisionAction::kRestart:
      // A guard stop with nothing to change is a restart: the fresh process gets back
      // whatever memory the old one had leaked.
      next.applied = DecisionAction::kRestart;
      return next;
    case DecisionAction::kReshard: {
      const int n = NearestWorkerCount(before, d.target_workers.value_or(before.workers * 2), before.workers);
      if (n == before.workers) {
        return fall_back_to_restart("no worker count other than " + std::to_string(before.workers) + " fits within [" +
                                    std::to_string(before.min_workers) + ", " + std::to_string(before.max_workers) +
                                    "]");
      }
      s.workers = n;
      next.reshard = true;
      next.reason += " (workers " + std::to_string(before.workers) + " -> " + std::to_string(n) + ")";
      return next;
    }
    case DecisionAction::kShrinkMicroBatch: {
      const int micro = d.target_micro_batch_size.value_or(before.grpo.micro_batch_size / 2);
      s.grpo.micro_batch_size = std::clamp(micro, 1, before.grpo.micro_batch_size);
      if (s.grpo.micro_batch_size == before.grpo.micro_batch_size) {
        return fall_back_to_restart("microBatchSize is already " + std::to_string(before.grpo.micro_batch_size));
      }
      next.reason += " (microBatchSize " + std::to_string(before.grpo.micro_batch_size) + " -> " +
                     std::to_string(s.grpo.micro_batch_size) + ")";
      return next;
    }
    case DecisionAction::kShrinkTokenBudget: {
      // 0 (off) counts as the budget the fixed split spends: microBatchSize full-length rows.
      const int seq = before.grpo.max_prompt_length + before.grpo.max_response_length;
      const int now = EffectiveTokenBudget(before.grpo);
      const int budget = d.target_max_tokens_per_micro_batch.value_or(now / 2);
      s.grpo.max_tokens_per_micro_batch = std::clamp(budget, seq, now);
      if (s.grpo.max_tokens_per_micro_batch >= now) {
        return fall_back_to_restart("maxTokensPerMicroBatch is already " + std::to_string(now) +
                                    ", one full-length sequence");
      }
      const std::string was = before.grpo.max_tokens_per_micro_batch > 0
                                  ? std::to_string(before.grpo.max_tokens_per_micro_batch)
                                  : "off (" + std::to_string(now) + ")";
      next.reason +=
          " (maxTokensPerMicroBatch " + was + " -> " + std::to_string(s.grpo.max_tokens_per_micro_batch) + ")";
      return next;
    }
    case DecisionAction::kEnableActivationCheckpointing:
      if (before.grpo.activation_checkpointing) return fall_back_to_restart("activation checkpointing is already on");
      s.grpo.activation_checkpointing = true;
      next.reason += " (activationCheckpointing off -> on)";
      return next;
    case DecisionAction::kDisableOffload:
    case DecisionAction::kEnableOffload: break;
  }
  // disableOffload / enableOffload: the flags the decision names; when it names none, off
  // means both off and on means optimizer state to host (the cheaper of the two to move).
  const bool on = d.action == DecisionAction::kEnableOffload;
  if (d.target_offload_params) s.sharding.offload_params = *d.target_offload_params;
  if (d.target_offload_optimizer) s.sharding.offload_optimizer = *d.target_offload_optimizer;
  if (!d.target_offload_params && !d.target_offload_optimizer) {
    s.sharding.offload_optimizer = on;
    if (!on) s.sharding.offload_params = false;
  }
  if (s.sharding == before.sharding) {
    return fall_back_to_restart(std::string("offload is already ") + (on ? "on" : "off"));
  }
  next.reason += " (offloadParams " + Flag(s.sharding.offload_params) + ", offloadOptimizer " +
                 Flag(s.sharding.offload_optimizer) + ")";
  return next;
}

}  // namespace headroom::guard
