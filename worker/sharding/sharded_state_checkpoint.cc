#include <spdlog/spdlog.h>

#include "worker/sharding/sharded_state_checkpoint.h"

#include <stdexcept>

namespace headroom::worker {

namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void RequireShape(const CheckpointReader& reader, const std::string& name, const std::vector<int64_t>& shape) {
  const auto& entry = reader.Entry(name);  // throws naming a missing tensor
  if (entry.shape != shape) {
    throw CheckpointError("checkpoint " + reader.dir().string() + ": tensor " + name + " has shape " +
                          ShapeText(entry.shape) + ", the model needs " + ShapeText(shape));
  }
}

// The parts of every parameter's tensor `prefix + name` that fall inside `range` of the
// flat buffer, as slices of `flat` (which covers exactly `range`).
void AppendSlices(const FlatLayout& layout, const std::string& prefix, FlatRange range, const torch::Tensor& flat,
                  std::vector<TensorSlice>& out) {
  for (const auto& slot : layout.slots()) {
    const FlatRange part = Intersect(range, slot.range());
    if (part.empty()) continue;
    out.push_back({prefix + slot.name, slot.shape, part.begin - slot.offset,
                   flat.narrow(0, part.begin - range.begin, part.numel())});
  }
}

// Reads the parts of every parameter's tensor `prefix + name` inside `range` into `flat`
// (which covers exactly `range`), staged through host memory. Padding is left alone.
void ReadSlices(const CheckpointReader& reader, const FlatLayout& layout, const std::string& prefix, FlatRange range,
                torch::Tensor flat) {
  for (const auto& slot : layout.slots()) {
    const FlatRange part = Intersect(range, slot.range());
    if (part.empty()) continue;
    torch::Tensor host = torch::empty({part.numel()}, flat.options().device(torch::kCPU));
    reader.ReadRangeInto(prefix + slot.name, part.begin - slot.offset, host);
    flat.narrow(0, part.begin - range.begin, part.numel()).copy_(host);
  }
}

}  // namespace

std::vector<TensorSlice> ShardedStateSlices(const std::vector<ShardedStatePart>& parts) {
  if (parts.empty()) throw std::invalid_argument("sharded checkpoint: no parameter groups");
  std::vector<TensorSlice> slices;
  for (const ShardedStatePart& part : parts) {
    FlatParameterGroup& group = *part.group;
    const ShardedAdamW& optimizer = *part.optimizer;
    const FlatLayout& layout = group.layout();
    const FlatRange owned = group.owned();
    AppendSlices(layout, kModelTensorPrefix, owned, group.Parameters(owned), slices);  // owned range at every stage
    // Moments: the owned range, whatever range the optimizer steps (stage 0 holds all of it).
    const FlatRange opt = optimizer.range();
    const int64_t at = owned.begin - opt.begin;
    AppendSlices(layout, kExpAvgTensorPrefix, owned, optimizer.exp_avg().narrow(0, at, owned.numel()), slices);
    AppendSlices(layout, kExpAvgSqTensorPrefix, owned, optimizer.exp_avg_sq().narrow(0, at, owned.numel()), slices);
  }
  if (parts.front().group->comm().rank() == 0) {
    slices.push_back(
        WholeTensor(kOptimizerStepTensor, torch::tensor({parts.front().optimizer->step()}, torch::kInt64)));
  }
  return slices;
}

void LoadShardedState(const CheckpointReader& reader, const std::vector<ShardedStatePart>& parts) {
  torch::NoGradGuard no_grad;
  for (const ShardedStatePart& part : parts) {
    for (const auto& slot : part.group->layout().slots()) {
      for (const char* prefix : {kModelTensorPrefix, kExpAvgTensorPrefix, kExpAvgSqTensorPrefix}) {
        RequireShape(reader, prefix + slot.name, slot.shape);
      }
    }
  }
  RequireShape(reader, kOptimizerStepTensor, {1});
  const int64_t step = reader.ReadFull(kOptimizerStepTensor).item<int64_t>();

  for (const ShardedStatePart& part : parts) {
    FlatParameterGroup& group = *part.group;
    ShardedAdamW& optimizer = *part.optimizer;
    const FlatLayout& layout = group.layout();
    group.Release();  // stage 3: the shard is the truth; a gathered copy would go stale
    const FlatRange needed = group.stage() == 3 ? group.owned() : FlatRange{0, layout.padded_numel()};
    ReadSlices(reader, layout, kModelTensorPrefix, needed, group.Parameters(needed));

    const FlatRange opt = optimizer.range();
    auto exp_avg = torch::zeros({opt.numel()}, optimizer.exp_avg().options());
    auto exp_avg_sq = torch::zeros({opt.numel()}, optimizer.exp_avg_sq().options());
    ReadSlices(reader, layout, kExpAvgTensorPrefix, opt, exp_avg);
    ReadSlices(reader, layout, kExpAvgSqTensorPrefix, opt, exp_avg_sq);
    optimizer.SetState(step, exp_avg, exp_avg_sq);
  }
}

}  // namespace headroom::worker
