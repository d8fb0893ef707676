#include <spdlog/spdlog.h>

#include "worker/train/training_state.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cstring>

#include "worker/sharding/sharded_state_checkpoint.h"

namespace headroom::worker {

std::vector<TensorSlice> TrainingStateSlices(GrpoTrainer& trainer) {
  return ShardedStateSlices(trainer.shards().parts());
}

void RestoreTrainingState(const CheckpointReader& reader, GrpoTrainer& trainer) {
  LoadShardedState(reader, trainer.shards().parts());
}

std::string CpuRngState() {
  const torch::Tensor bytes = at::detail::getDefaultCPUGenerator().get_state();
  return std::string(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()), static_cast<size_t>(bytes.numel()));
}

void SetCpuRngState(const std::string& bytes) {
  torch::Tensor t = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  std::memcpy(t.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(t);
}

}  // namespace headroom::worker
