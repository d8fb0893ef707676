// The seam between training and transport: every collective the worker uses.
//
// Contract:
//   - All ranks call the same collectives in the same order with tensors of the same
//     shape and dtype (as in NCCL/Gloo). Calls block until complete on this rank.
//   - Operations are in place on `tensor` (all_reduce, broadcast) or write to `output`.
//   - A peer that never arrives or dies makes every surviving rank throw
//     CommunicatorError within the configured timeout: never a hang.
//   - Tensors live on the communicator's device (CPU for Gloo and Local, CUDA for NCCL).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace headroom::worker {

class CommunicatorError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class ReduceOp { kSum, kMax, kMin };

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend() const = 0;  // "local", "gloo", "nccl"
  // Where tensors passed to the collectives must live (CUDA for NCCL).
  virtual torch::Device device() const { return torch::kCPU; }

  virtual void all_reduce(torch::Tensor& tensor, ReduceOp op = ReduceOp::kSum) = 0;
  // `input` has world_size() * output.numel() elements; rank r gets the reduced r-th chunk.
  virtual void reduce_scatter(const torch::Tensor& input, torch::Tensor& output, ReduceOp op = ReduceOp::kSum) = 0;
  // `output` has world_size() * input.numel() elements, rank r's input at chunk r.
  virtual void all_gather(const torch::Tensor& input, torch::Tensor& output) = 0;
  virtual void broadcast(torch::Tensor& tensor, int root) = 0;
  virtual void barrier() = 0;
};

// World size 1: every collective is the identity (a copy where shapes require it).
std::unique_ptr<Communicator> MakeLocalCommunicator();

}  // namespace headroom::worker
