// How a model's state is split over the ranks (spec.sharding plus transport tuning).
#pragma once

#include <cstdint>

namespace headroom::worker {

struct ShardingOptions {
  // 0 = DDP (everything replicated, gradients all_reduced); 1 = optimizer state sharded;
  // 2 = + gradients sharded (reduce_scatter); 3 = + parameters sharded (gathered for use).
  int stage = 2;
  // Stage 3: keep the parameter shard in host memory between uses (a no-op on CPU).
  bool offload_params = false;
  // Keep optimizer moments in host memory and step there (a no-op on CPU).
  bool offload_optimizer = false;
  // Elements per collective call when reducing gradients or gathering parameters: big
  // enough to amortise a call, small enough that the staging copy stays small.
  int64_t bucket_numel = int64_t{1} << 22;  // 16 MiB of fp32
  // Keep bf16 copies of the parameters for the passes without gradient (rollout, old
  // log-probs): inference_weights.h, which also says who turns it on.
  bool bf16_inference_weights = false;
};

}  // namespace headroom::worker
