#include <spdlog/spdlog.h>

#include "worker/sharding/recomputed_block.h"

#include <cstdint>
#include <optional>

#include "worker/model/bf16_autocast.h"

namespace headroom::worker {
namespace {

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
    return recomputer->ForwardNoGrad(layer, x, *mask);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::Tensor x = ctx->get_saved_variables().at(0);
    auto* recomputer = reinterpret_cast<BlockRecomputer*>(static_cast<intptr_t>(ctx->saved_data["recomputer"].toInt()));
    const int64_t layer = ctx->saved_data["layer"].toInt();
    const auto it = ctx->saved_data.find("mask");
    const torch::Tensor mask = it == ctx->saved_data.end() ? torch::Tensor() : it->second.toTensor();
    std::optional<Bf16Autocast> autocast;
    if (ctx->saved_data["autocast"].toBool()) autocast.emplace(x.device());
    torch::Tensor dx = recomputer->Backward(layer, x, mask, grad_outputs.at(0));
    // One entry per forward input: none for the recomputer, the layer and the mask.
    return {dx, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor RecomputedBlock(BlockRecomputer& recomputer, int64_t layer, const torch::Tensor& x,
                              const torch::Tensor& mask) {
  if (!torch::GradMode::is_enabled()) return recomputer.ForwardNoGrad(layer, x, mask);
  return RecomputedBlockFunction::apply(x, &recomputer, layer, &mask);
}

}  // namespace headroom::worker
