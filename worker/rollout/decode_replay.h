// Runs one decode step (decode_step.h) again and again, as fast as the device allows.
//
// On a CUDA device (CUDA builds, decode_replay_cuda.cc) the first kWarmupRuns calls run the
// step eagerly (lazy initialisations and library workspaces happen outside any capture),
// the next captures it once into a CUDA graph and replays it, and every later call only
// replays: one graph launch per token instead of a few hundred kernel launches. If the
// capture fails, the failure is logged once and every call runs eagerly from then on.
// Elsewhere every call runs the step eagerly.
//
// Contract for `step`: it reads and writes only tensors that keep their addresses between
// calls (buffers updated in place; parameters the optimizer updates in place), reads
// nothing back to the host, and does the same host-side work on every call: a replay
// repeats the captured device work and none of the host code.
#pragma once

#include <functional>
#include <memory>

#include <torch/torch.h>

namespace headroom::worker {

class DecodeReplay {
 public:
  static constexpr int kWarmupRuns = 2;

  virtual ~DecodeReplay() = default;
  // One step (see above).
  virtual void Run() = 0;
  // Whether calls now replay a captured graph.
  virtual bool graphed() const = 0;
};

// Whether this build can replay CUDA graphs (a CUDA build with HEADROOM_CUDA_GRAPHS on).
// Where it cannot, a graph replay is an eager one.
bool DecodeGraphsCompiled();

// A CUDA graph replay on a CUDA device of a CUDA build when use_graph is set; an eager one
// otherwise.
std::unique_ptr<DecodeReplay> MakeDecodeReplay(std::function<void()> step, const torch::Device& device, bool use_graph);

#if defined(HEADROOM_CUDA_GRAPHS)
// decode_replay_cuda.cc.
std::unique_ptr<DecodeReplay> MakeCudaGraphDecodeReplay(std::function<void()> step, int device_index);
#endif

}  // namespace headroom::worker
