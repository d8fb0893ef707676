// Reading a checkpoint step, whatever world size wrote it.
//
// Opening validates the step as a whole: the manifest parses, every tensor's shards
// tile it, and every rank file on disk has exactly the size the manifest recorded (a
// truncated or rewritten file is named). ReadRange then serves any contiguous range of a
// tensor's flattened elements — rank r of M's shard — from whichever rank files hold the
// overlapping pieces, so a step saved by N ranks loads on M.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <optional>
#include <string>

#include "worker/checkpoint/checkpoint_format.h"

namespace headroom::worker {

class CheckpointReader {
 public:
  // `step_dir` is DIR/step-NNNNNN. Throws CheckpointError naming what is wrong.
  explicit CheckpointReader(std::filesystem::path step_dir);
  // The step `DIR/latest` names; nullopt when DIR holds no checkpoint yet.
  static std::optional<CheckpointReader> OpenLatest(const std::filesystem::path& root);

  // Refuses a checkpoint written by a run defined differently (docs/design.md, "Checkpoints"): throws
  // CheckpointError naming both hashes and what the hash covers.
  void RequireSpecHash(const std::string& expected) const;

  const CheckpointManifest& manifest() const { return manifest_; }
  const std::filesystem::path& dir() const { return dir_; }
  int64_t step() const { return manifest_.step; }
  bool Has(const std::string& name) const { return manifest_.tensors.count(name) > 0; }
  // Throws CheckpointError when the checkpoint has no tensor `name`.
  const TensorEntry& Entry(const std::string& name) const;

  // Elements [begin, end) of tensor `name` flattened, as a 1-D CPU tensor.
  torch::Tensor ReadRange(const std::string& name, int64_t begin, int64_t end) const;
  // The same into `out` (CPU, contiguous, end - begin elements of the tensor's dtype).
  void ReadRangeInto(const std::string& name, int64_t begin, torch::Tensor& out) const;
  // The whole tensor in its saved shape.
  torch::Tensor ReadFull(const std::string& name) const;

  // The RNG state rank `rank` saved; nullopt when the saving world had no such rank.
  std::optional<std::string> RngState(int rank) const;

 private:
  std::filesystem::path dir_;
  CheckpointManifest manifest_;
};

}  // namespace headroom::worker
