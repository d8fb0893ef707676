// Activation checkpointing as a model transform (model_transforms.h): under autograd each
// block keeps only its input for backward, and backward runs the block again on that input
// to get its gradients, as torch.utils.checkpoint does around a block. The step's
// activations drop from every block's to one block's plus the block boundaries, for a
// second forward of every block in backward (docs/design.md, "Model transforms").
//
// Contract:
//   - Applies to stages 0-2. ZeRO stage 3 already runs every block this way around its
//     gather (worker/sharding/recomputed_block.h), so ModelTransformsOf leaves it out there.
//   - Without autograd (rollout, old and reference log-probs) a block runs once, as before.
//   - A block computes the same function twice: whatever runs inside a block (the wrappers
//     added before this one included) must be deterministic, and a forward under autograd
//     must not write a KV cache (generation runs without autograd).
//   - The gradients equal those of keeping the activations: the recompute repeats the same
//     operations on the same input; each parameter's gradient is summed into .grad as a
//     plain backward would (so flat gradient buffers, as the sharding's, keep working).
#pragma once

#include "worker/model/model_transforms.h"

namespace headroom::worker {

// The transform's registered name.
extern const char kActivationCheckpointing[];

// The wrapper the transform adds (also usable directly, e.g. in a benchmark).
std::shared_ptr<BlockWrapper> MakeRecomputeInBackward();

}  // namespace headroom::worker
