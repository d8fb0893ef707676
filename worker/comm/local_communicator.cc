// The one-rank communicator: what a single worker process uses, and the reference the
// multi-rank backends are tested against.
#include <spdlog/spdlog.h>

#include "worker/comm/communicator.h"

namespace headroom::worker {
namespace {

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend() const override { return "local"; }

  void all_reduce(torch::Tensor&, ReduceOp) override {}
  void reduce_scatter(const torch::Tensor& input, torch::Tensor& output, ReduceOp) override {
    CheckSameSize(input, output, "reduce_scatter");
    output.copy_(input.view_as(output));
  }
  void all_gather(const torch::Tensor& input, torch::Tensor& output) override {
    CheckSameSize(input, output, "all_gather");
    output.copy_(input.view_as(output));
  }
  void broadcast(torch::Tensor&, int root) override {
    if (root != 0)
      throw CommunicatorError("broadcast: root " + std::to_string(root) + " out of range for world size 1");
  }
  void barrier() override {}

 private:
  static void CheckSameSize(const torch::Tensor& a, const torch::Tensor& b, const char* op) {
    if (a.numel() != b.numel()) {
      throw CommunicatorError(std::string(op) + ": input has " + std::to_string(a.numel()) + " elements, output " +
                              std::to_string(b.numel()) + " (world size 1)");
    }
  }
};

}  // namespace

std::unique_ptr<Communicator> MakeLocalCommunicator() { return std::make_unique<LocalCommunicator>(); }

}  // namespace headroom::worker
