// The trainer's state as checkpoint tensors, and back (docs/design.md, "Checkpoints").
//
// The model and optimizer are sharded (worker/sharding/): each rank saves the slices of
// its owned range and a resume reads the ranges its own layout needs, so a checkpoint
// saved by N ranks at any stage loads on M ranks at any stage. Tensor names and the
// format are sharded_state_checkpoint.h's. A resume with the same world size and stage
// continues bit for bit: parameters, both AdamW moments and the step count are restored
// exactly (the reference model is rebuilt from the spec, as on a fresh start).
#pragma once

#include <string>
#include <vector>

#include "worker/checkpoint/checkpoint_reader.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/train/grpo_trainer.h"

namespace headroom::worker {

// This rank's slices of the model and optimizer state (views: save before the next step).
std::vector<TensorSlice> TrainingStateSlices(GrpoTrainer& trainer);

// Collective-free. Loads every parameter and the optimizer state into `trainer`, so the
// next optimizer step continues bias correction where the saved run left off. Throws
// CheckpointError naming the tensor when one is missing or has another shape.
void RestoreTrainingState(const CheckpointReader& reader, GrpoTrainer& trainer);

// The global CPU generator's state, as opaque bytes, and back.
std::string CpuRngState();
void SetCpuRngState(const std::string& bytes);

}  // namespace headroom::worker
