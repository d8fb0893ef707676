#include <spdlog/spdlog.h>

#include "worker/train/training_state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/string_utils.h>

#include <cstring>
#include <stdexcept>

namespace headroom::worker {
namespace {

// torch::optim keys per-parameter state by the address of the tensor's impl.
std::string StateKey(const torch::Tensor& param) { return c10::guts::to_string(param.unsafeGetTensorImpl()); }

torch::Tensor ReadShaped(const CheckpointReader& reader, const std::string& name, const torch::Tensor& like) {
  if (!reader.Has(name)) {
    throw std::runtime_error("checkpoint " + reader.dir().string() + " has no tensor " + name);
  }
  torch::Tensor saved = reader.ReadFull(name);
  if (saved.sizes() != like.sizes()) {
    throw std::runtime_error("checkpoint " + reader.dir().string() + ": tensor " + name + " has shape " +
                             c10::str(saved.sizes()) + ", this model's has " + c10::str(like.sizes()));
  }
  return saved;
}

}  // namespace

std::vector<TensorSlice> TrainingStateSlices(GrpoTrainer& trainer, int rank, int world) {
  std::vector<TensorSlice> slices;
  auto& state = trainer.optimizer().state();
  for (const ParameterSlot& slot : trainer.flat_parameters().slots()) {
    slices.push_back(EvenSliceOf("model." + slot.name, slot.param.detach(), rank, world));
    auto it = state.find(StateKey(slot.param));
    if (it == state.end()) continue;  // no step has touched it yet
    auto& adam = static_cast<torch::optim::AdamWParamState&>(*it->second);
    slices.push_back(EvenSliceOf("optim.exp_avg." + slot.name, adam.exp_avg(), rank, world));
    slices.push_back(EvenSliceOf("optim.exp_avg_sq." + slot.name, adam.exp_avg_sq(), rank, world));
    // The count of steps is one element: rank 0 writes it, the others an empty range.
    const auto step = torch::tensor({static_cast<int64_t>(adam.step())}, torch::kInt64);
    slices.push_back(EvenSliceOf("optim.step." + slot.name, step, rank, world));
  }
  return slices;
}

void RestoreTrainingState(const CheckpointReader& reader, GrpoTrainer& trainer) {
  torch::NoGradGuard no_grad;
  auto& state = trainer.optimizer().state();
  for (const ParameterSlot& slot : trainer.flat_parameters().slots()) {
    slot.param.copy_(ReadShaped(reader, "model." + slot.name, slot.param));
    const std::string step_name = "optim.step." + slot.name;
    if (!reader.Has(step_name)) continue;  // saved before any step touched it
    auto adam = std::make_unique<torch::optim::AdamWParamState>();
    adam->step(reader.ReadFull(step_name).item<int64_t>());
    adam->exp_avg(ReadShaped(reader, "optim.exp_avg." + slot.name, slot.param).to(slot.param.options()));
    adam->exp_avg_sq(ReadShaped(reader, "optim.exp_avg_sq." + slot.name, slot.param).to(slot.param.options()));
    state[StateKey(slot.param)] = std::move(adam);
  }
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
