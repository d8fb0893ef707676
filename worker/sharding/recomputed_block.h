// A transformer block as one autograd node that keeps neither its parameters nor its
// activations between forward and backward: ZeRO-3 parameter gathering combined with
// activation checkpointing, as FSDP wraps a block with checkpoint_wrapper.
//
// Forward runs the block without autograd (the recomputer acquires and releases its
// parameters around it) and saves only the block's input. Backward asks the recomputer
// to run the block again on that input with autograd on and back-propagate the output
// gradient through it: the recomputer re-acquires the parameters there and collects
// their gradients itself; the node returns dL/dx to the rest of the graph. Autograd never
// sees the block's parameters, so nothing holds them between the two passes.
//
// Contract: the recomputer outlives the backward pass; Forward and Backward compute the
// same function. Random draws inside a block (LoRA dropout) are the same in both: the
// node keeps the state of the input device's default generator from before the forward,
// runs the recompute from it, and then restores the generator's state, as
// torch.utils.checkpoint's preserve_rng_state does. So the recompute must draw in the same
// order as the forward (it runs the same code on the same input), and nothing else may
// draw from that generator during the recompute. The node is in the graph even when x
// does not require grad (frozen embeddings), so the block's parameters get gradients.
#pragma once

#include <cstdint>

#include <torch/torch.h>

namespace headroom::worker {

class BlockRecomputer {
 public:
  virtual ~BlockRecomputer() = default;
  // Block `layer` on x, autograd off. `mask` as CausalLMImpl::Block takes it.
  virtual torch::Tensor ForwardNoGrad(int64_t layer, const torch::Tensor& x, const torch::Tensor& mask) = 0;
  // Recomputes block `layer` on x with autograd on, back-propagates grad_y, keeps the
  // parameter gradients, returns dL/dx.
  virtual torch::Tensor Backward(int64_t layer, const torch::Tensor& x, const torch::Tensor& mask,
                                 const torch::Tensor& grad_y) = 0;
};

// y = block `layer`(x), differentiable with respect to x (and, through the recomputer,
// the block's parameters). Under no-grad it is just recomputer.ForwardNoGrad.
torch::Tensor RecomputedBlock(BlockRecomputer& recomputer, int64_t layer, const torch::Tensor& x,
                              const torch::Tensor& mask);

}  // namespace headroom::worker
