#include <spdlog/spdlog.h>

#include "worker/model/activation_checkpointing.h"

#include <memory>
#include <optional>

#include "worker/model/bf16_autocast.h"
#include "worker/telemetry/heap_trim.h"

namespace headroom::worker {

const char kActivationCheckpointing[] = "activation-checkpointing";

namespace {

// The block's inner call, kept in the autograd node until backward (an IValue capsule, so
// the node owns it and frees it with the graph).
struct KeptInner : torch::CustomClassHolder {
  explicit KeptInner(BlockWrapper::Inner f) : inner(std::move(f)) {}
  BlockWrapper::Inner inner;
};

struct RecomputedInBackward : public torch::autograd::Function<RecomputedInBackward> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const BlockWrapper::Inner* inner) {
    ctx->save_for_backward({x});
    ctx->saved_data["inner"] = c10::IValue::make_capsule(c10::make_intrusive<KeptInner>(*inner));
    // The forward runs inside the model's autocast scope and backward outside it: the
    // recompute must multiply in the same dtype to give the same block.
    ctx->saved_data["autocast"] = CudaAutocastEnabled();
    // apply() runs this with autograd off, but the block's kernels are chosen by whether
    // autograd records (fused Functions, stacked projections): run it as the recompute will,
    // under autograd on a detached input, so forward and recompute give the same bits, then
    // drop the graph, and with it the block's intermediates, at once.
    torch::AutoGradMode autograd(true);
    torch::Tensor input = x.detach().requires_grad_(true);
    return (*inner)(input).detach();
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::Tensor x = ctx->get_saved_variables().at(0);
    if (x.device().is_cpu()) ReturnFreedHeapBeforeRecompute(static_cast<int64_t>(x.nbytes()));
    const auto kept = c10::static_intrusive_pointer_cast<KeptInner>(ctx->saved_data["inner"].toCapsule());
    torch::Tensor dx;
    {
      std::optional<Bf16Autocast> autocast;
      if (ctx->saved_data["autocast"].toBool()) autocast.emplace(x.device());
      torch::AutoGradMode autograd(true);  // the engine runs backward functions without it
      torch::Tensor input = x.detach().requires_grad_(true);
      torch::Tensor y = kept->inner(input);
      // Accumulates the block's parameter gradients into their .grad, as the outer
      // backward would have.
      torch::autograd::backward({y}, {grad_outputs.at(0)});
      dx = input.grad();
    }
    return {dx, torch::Tensor()};
  }
};

class RecomputeInBackward : public BlockWrapper {
 public:
  torch::Tensor Run(int64_t /*layer*/, const torch::Tensor& x, const Inner& inner) override {
    if (!torch::GradMode::is_enabled()) return inner(x);
    // The node must be in the graph even when nothing before the block is trained (frozen
    // embeddings): otherwise backward never reaches it and the block's own parameters get
    // no gradient. The gradient then flows into a throwaway leaf.
    const torch::Tensor input = x.requires_grad() ? x : x.detach().requires_grad_(true);
    return RecomputedInBackward::apply(input, &inner);
  }
};

class ActivationCheckpointing : public ModelTransform {
 public:
  void Apply(CausalLMImpl& model) override { WrapBlocks(model, MakeRecomputeInBackward()); }
};

const bool activation_checkpointing_registered =
    RegisterModelTransform(kActivationCheckpointing, [] { return std::make_unique<ActivationCheckpointing>(); });

}  // namespace

std::shared_ptr<BlockWrapper> MakeRecomputeInBackward() { return std::make_shared<RecomputeInBackward>(); }

}  // namespace headroom::worker
