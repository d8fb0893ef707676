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

// Reads elements [range) of the unpadded flat space of tensor `name` (a flat [numel]
// tensor) into `out`, which covers exactly `range`. Staged through host memory.
void ReadFlatInto(const CheckpointReader& reader, const std::string& name, FlatRange range, torch::Tensor out) {
  if (range.empty()) return;
  torch::Tensor host = torch::empty({range.numel()}, out.options().device(torch::kCPU));
  reader.ReadRangeInto(name, range.begin, host);
  out.copy_(host);
}

}  // namespace

std::vector<TensorSlice> ShardedStateSlices(FlatParameterGroup& group, const ShardedAdamW& optimizer) {
  const FlatLayout& layout = group.layout();
  const FlatRange owned = group.owned();
  std::vector<TensorSlice> slices;
  torch::Tensor params = group.Parameters(owned);  // the owned range at every stage
  for (const auto& slot : layout.slots()) {
    FlatRange part = Intersect(owned, slot.range());
    if (part.empty()) continue;
    slices.push_back({kModelTensorPrefix + slot.name, slot.shape, part.begin - slot.offset,
                      params.narrow(0, part.begin - owned.begin, part.numel())});
  }
  // Moments: the owned range clipped to the unpadded length, whatever range the
  // optimizer steps (stage 0 holds all of it).
  const FlatRange saved = Intersect(owned, {0, layout.numel()});
  if (!saved.empty()) {
    const FlatRange opt = optimizer.range();
    const int64_t at = saved.begin - opt.begin;
    slices.push_back({kExpAvgTensor, {layout.numel()}, saved.begin, optimizer.exp_avg().narrow(0, at, saved.numel())});
    slices.push_back(
        {kExpAvgSqTensor, {layout.numel()}, saved.begin, optimizer.exp_avg_sq().narrow(0, at, saved.numel())});
  }
  if (group.comm().rank() == 0) {
    slices.push_back(WholeTensor(kOptimizerStepTensor, torch::tensor({optimizer.step()}, torch::kInt64)));
  }
  return slices;
}

void LoadShardedState(const CheckpointReader& reader, FlatParameterGroup& group, ShardedAdamW& optimizer) {
  torch::NoGradGuard no_grad;
  const FlatLayout& layout = group.layout();
  for (const auto& slot : layout.slots()) RequireShape(reader, kModelTensorPrefix + slot.name, slot.shape);
  RequireShape(reader, kExpAvgTensor, {layout.numel()});
  RequireShape(reader, kExpAvgSqTensor, {layout.numel()});
  RequireShape(reader, kOptimizerStepTensor, {1});

  group.Release();  // stage 3: the shard is the truth; a gathered copy would go stale
  const FlatRange needed = group.stage() == 3 ? group.owned() : FlatRange{0, layout.padded_numel()};
  torch::Tensor params = group.Parameters(needed);
  for (const auto& slot : layout.slots()) {
    FlatRange part = Intersect(needed, slot.range());
    if (part.empty()) continue;
    torch::Tensor host = torch::empty({part.numel()}, params.options().device(torch::kCPU));
    reader.ReadRangeInto(kModelTensorPrefix + slot.name, part.begin - slot.offset, host);
    params.narrow(0, part.begin - needed.begin, part.numel()).copy_(host);
  }

  const FlatRange opt = optimizer.range();
  const FlatRange present = Intersect(opt, {0, layout.numel()});
  auto exp_avg = torch::zeros({opt.numel()}, optimizer.exp_avg().options());
  auto exp_avg_sq = torch::zeros({opt.numel()}, optimizer.exp_avg_sq().options());
  ReadFlatInto(reader, kExpAvgTensor, present, exp_avg.narrow(0, present.begin - opt.begin, present.numel()));
  ReadFlatInto(reader, kExpAvgSqTensor, present, exp_avg_sq.narrow(0, present.begin - opt.begin, present.numel()));
  const int64_t step = reader.ReadFull(kOptimizerStepTensor).item<int64_t>();
  optimizer.SetState(step, exp_avg, exp_avg_sq);
}

}  // namespace headroom::worker
