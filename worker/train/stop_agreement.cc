#include <spdlog/spdlog.h>

#include "worker/train/stop_agreement.h"

namespace headroom::worker {

StopKind AgreeOnStop(Communicator& comm, bool drain_requested, bool guard_decided) {
  const int64_t mine = guard_decided ? 2 : (drain_requested ? 1 : 0);
  auto flag = torch::full({1}, mine, torch::TensorOptions().dtype(torch::kInt64).device(comm.device()));
  comm.all_reduce(flag, ReduceOp::kMax);
  return static_cast<StopKind>(flag.cpu().item<int64_t>());
}

}  // namespace headroom::worker
