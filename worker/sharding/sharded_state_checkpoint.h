// A sharded model + optimizer as checkpoint tensors, reshardable between world sizes and
// stages (docs/design.md, "Checkpoints").
//
// Names (core/checkpoint/checkpoint_layout.h) and shapes (independent of world size, stage
// and padding):
//   model.<parameter name>            the parameter's own shape
//   optim.exp_avg.<parameter name>    the parameter's shape: AdamW first moments
//   optim.exp_avg_sq.<parameter name> the parameter's shape: second moments
//   optim.step                        [1] int64, saved by rank 0
// Why per parameter and not one flat [numel] moment tensor: the flat order is the model's
// parameter order, so a flat tensor would load into the wrong parameters, silently, if
// that order ever changed; per-parameter names and shapes are checked on load.
// ShardedAdamW keeps one step count for the whole range, hence one optim.step.
// Each rank saves the part of every tensor that falls inside its owned range (at stage 0
// too, where it holds everything: the owned ranges tile the buffer, so replicated state
// is written once, in parallel). Loading reads what the new layout needs: the full
// parameters at stages 0-2, the owned range at stage 3; the optimizer's range().
// A model may be split into several groups (one per layer at stage 3, model_shards.h),
// each with its own optimizer stepped in lockstep: since every tensor is named per
// parameter, how the parameters are grouped is not in the checkpoint either.
#pragma once

#include <string>
#include <vector>

#include "worker/checkpoint/checkpoint_reader.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/sharding/flat_parameter_group.h"
#include "worker/sharding/sharded_adamw.h"

namespace headroom::worker {

// One group of a model and the optimizer over it.
struct ShardedStatePart {
  FlatParameterGroup* group;
  ShardedAdamW* optimizer;
};

// This rank's slices, to pass to CheckpointWriter::Save (views, not copies: save before
// the next update). Reads the owned range, so stage 3 needs no Gather(). The step count
// is the first part's (all step together).
std::vector<TensorSlice> ShardedStateSlices(const std::vector<ShardedStatePart>& parts);

// Loads parameters and optimizer state saved by any world size, stage and grouping.
// Throws CheckpointError when a tensor is missing or its shape differs from the model's
// (naming it). Stage 3: leaves the parameters released.
void LoadShardedState(const CheckpointReader& reader, const std::vector<ShardedStatePart>& parts);

}  // namespace headroom::worker
