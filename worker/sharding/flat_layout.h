// Where each parameter lives in one flat buffer, and which range of it each rank owns.
//
// Contract:
//   - Parameters are laid out back to back in the order given (every rank must give the
//     same names, shapes and order), starting at offset 0.
//   - The buffer is padded with zeros to a multiple of the world size, so every rank owns
//     an equal contiguous range: rank r owns [r * S, (r + 1) * S) with S = padded / world.
//     Equal ranges are what reduce_scatter/all_gather need; the padding (< world
//     elements) is never saved in checkpoints, so it may differ between world sizes.
//   - Pure bookkeeping: no tensors are allocated here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace headroom::worker {

// A half-open range [begin, end) of flat elements.
struct FlatRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t numel() const { return end > begin ? end - begin : 0; }
  bool empty() const { return numel() == 0; }
};

// The overlap of two ranges (empty when they do not meet).
FlatRange Intersect(FlatRange a, FlatRange b);

struct FlatSlot {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // first element in the flat buffer
  int64_t numel = 0;
  FlatRange range() const { return {offset, offset + numel}; }
};

class FlatLayout {
 public:
  // Throws std::invalid_argument when there are no parameters, a name repeats, or
  // world < 1.
  FlatLayout(const std::vector<std::pair<std::string, torch::Tensor>>& params, int world);

  const std::vector<FlatSlot>& slots() const { return slots_; }
  int world() const { return world_; }
  int64_t numel() const { return numel_; }                // all parameters, unpadded
  int64_t padded_numel() const { return padded_numel_; }  // multiple of world()
  int64_t shard_numel() const { return padded_numel_ / world_; }
  // The range rank `rank` owns. Throws std::out_of_range for a rank outside the world.
  FlatRange Shard(int rank) const;

 private:
  std::vector<FlatSlot> slots_;
  int world_ = 1;
  int64_t numel_ = 0;
  int64_t padded_numel_ = 0;
};

}  // namespace headroom::worker
