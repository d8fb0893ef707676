#include <spdlog/spdlog.h>

#include "worker/rollout/decode_replay.h"

#include <utility>

namespace headroom::worker {
namespace {

class EagerDecodeReplay : public DecodeReplay {
 public:
  explicit EagerDecodeReplay(std::function<void()> step) : step_(std::move(step)) {}
  void Run() override { step_(); }
  bool graphed() const override { return false; }

 private:
  std::function<void()> step_;
};

}  // namespace

bool DecodeGraphsCompiled() {
#if defined(HEADROOM_CUDA_GRAPHS)
  return true;
#else
  return false;
#endif
}

std::unique_ptr<DecodeReplay> MakeDecodeReplay(std::function<void()> step, const torch::Device& device,
                                               bool use_graph) {
#if defined(HEADROOM_CUDA_GRAPHS)
  if (use_graph && device.is_cuda())
    return MakeCudaGraphDecodeReplay(std::move(step), device.index() < 0 ? 0 : device.index());
#else
  (void)device;
  (void)use_graph;
#endif
  return std::make_unique<EagerDecodeReplay>(std::move(step));
}

}  // namespace headroom::worker
