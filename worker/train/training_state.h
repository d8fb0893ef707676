// The trainer's state as checkpoint tensors, and back (design.md, "Checkpoints").
//
// Names: "model.<param>" for every parameter, "optim.exp_avg.<param>",
// "optim.exp_avg_sq.<param>" and "optim.step.<param>" (1-element int64) for every
// parameter AdamW holds state for. Parameters and AdamW state are replicated over ranks,
// so each rank saves its even 1/world slice (EvenSliceOf) and a resume reads whole
// tensors (ReadFull): any world size, micro-batch size or sharding stage loads it.
#pragma once

#include <string>
#include <vector>

#include "worker/checkpoint/checkpoint_reader.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/train/grpo_trainer.h"

namespace headroom::worker {

// This rank's slices of the model and optimizer state.
std::vector<TensorSlice> TrainingStateSlices(GrpoTrainer& trainer, int rank, int world);

// Copies every saved parameter and AdamW state entry into `trainer`, so the next
// optimizer step continues bias correction where the saved run left off. Throws
// std::runtime_error naming the tensor when one is missing or has another shape.
void RestoreTrainingState(const CheckpointReader& reader, GrpoTrainer& trainer);

// The global CPU generator's state, as opaque bytes, and back.
std::string CpuRngState();
void SetCpuRngState(const std::string& bytes);

}  // namespace headroom::worker
