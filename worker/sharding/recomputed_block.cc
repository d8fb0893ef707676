#include <spdlog/spdlog.h>

#include "worker/sharding/recomputed_block.h"

#include <ATen/Context.h>

#include <cstdint>
#include <mutex>
#include <optional>

#include "worker/model/bf16_autocast.h"
#include "worker/telemetry/heap_trim.h"

namespace headroom::worker {
namespace {

// The state of the generator random operators on `device` draw from (dropout: the CPU's,
// or the CUDA device's).
at::Generator GeneratorOf(const torch::Device& device) { return at::globalContext().defaultGenerator(device); }

torch::Tensor StateOf(at::Generator& generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void SetState(at::Generator& generator, const torch::Tensor& state) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

// Runs the recompute from the generator state the forward started with, then puts back
// the state it found, as torch.utils.checkpoint's preserve_rng_state does: the recompute
// draws the forward's masks, and the draws after the backward are what they would be
// without it.
class ReplayedRandomness {
 public:
  ReplayedRandomness(const torch::Device& device, const torch::Tensor& forward_state)
      : generator_(GeneratorOf(device)), now_(StateOf(generator_)) {
    SetState(generator_, forward_state);
  }
  ~ReplayedRandomness() { SetState(generator_, now_); }
  ReplayedRandomness(const ReplayedRandomness&) = delete;
  ReplayedRandomness& operator=(const ReplayedRandomness&) = delete;

 private:
  at::Generator generator_;
  torch::Tensor now_;
};

// torch::autograd::Function over (x, recomputer, layer, mask). Only x is an autograd
// input: the mask goes by pointer (it may be undefined, and is a constant) and is kept
// in the context by value.
struct RecomputedBlockFunction : public torch::autograd::Function<RecomputedBlockFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               BlockRecomputer* recomputer, int64_t layer, const torch::Tensor* mask) {
    // apply() runs this with autograd off, so the parameters are not saved anywhere.
    ctx->save_for_backward({x});
    ctx->saved_data["recomputer"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(recomputer));
    ctx->saved_data["layer"] = layer;
    if (mask->defined()) ctx->saved_data["mask"] = *mask;
    // The forward runs inside the model's autocast scope and backward outside it: the
    // recompute must multiply in the same dtype to give the same block.
    ctx->saved_data["autocast"] = CudaAutocastEnabled();
    // A block may draw random numbers (LoRA dropout, worker/model/lora.h): the recompute
    // replays them from the state the forward started with.
    at::Generator generator = GeneratorOf(x.device());
    ctx->saved_data["rng"] = StateOf(generator);
    return recomputer->ForwardNoGrad(layer, x, *mask);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::Tensor x = ctx->get_saved_variables().at(0);
    if (x.device().is_cpu()) ReturnFreedHeapBeforeRecompute(static_cast<int64_t>(x.nbytes()));
    auto* recomputer = reinterpret_cast<BlockRecomputer*>(static_cast<intptr_t>(ctx->saved_data["recomputer"].toInt()));
    const int64_t layer = ctx->saved_data["layer"].toInt();
    const auto it = ctx->saved_data.find("mask");
    const torch::Tensor mask = it == ctx->saved_data.end() ? torch::Tensor() : it->second.toTensor();
    std::optional<Bf16Autocast> autocast;
    if (ctx->saved_data["autocast"].toBool()) autocast.emplace(x.device());
    torch::Tensor dx;
    {
      ReplayedRandomness replay(x.device(), ctx->saved_data["rng"].toTensor());
      dx = recomputer->Backward(layer, x, mask, grad_outputs.at(0));
    }
    // One entry per forward input: none for the recomputer, the layer and the mask.
    return {dx, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor RecomputedBlock(BlockRecomputer& recomputer, int64_t layer, const torch::Tensor& x,
                              const torch::Tensor& mask) {
  if (!torch::GradMode::is_enabled()) return recomputer.ForwardNoGrad(layer, x, mask);
  // The node must be in the graph even when nothing before the block trains (a LoRA job's
  // frozen embeddings): otherwise backward never reaches it and the block's own parameters
  // get no gradient. The gradient then flows into a throwaway leaf.
  const torch::Tensor input = x.requires_grad() ? x : x.detach().requires_grad_(true);
  return RecomputedBlockFunction::apply(input, &recomputer, layer, &mask);
}

}  // namespace headroom::worker
