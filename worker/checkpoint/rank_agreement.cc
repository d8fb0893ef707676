#include <spdlog/spdlog.h>

#include "worker/checkpoint/rank_agreement.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstring>

namespace headroom::worker {

std::vector<std::string> AllGatherBytes(Communicator& comm, const std::string& bytes) {
  const int world = comm.world_size();
  const auto on_device = torch::TensorOptions().device(comm.device());
  torch::Tensor length = torch::tensor({static_cast<int64_t>(bytes.size())}, torch::kInt64).to(comm.device());
  torch::Tensor lengths = torch::zeros({world}, on_device.dtype(torch::kInt64));
  comm.all_gather(length, lengths);
  lengths = lengths.cpu();
  // At least one byte a rank: when every rank sends "" (all checks passed), a zero-sized
  // all_gather divides by zero inside Gloo (SIGFPE). The lengths say what is real.
  const int64_t longest = std::max<int64_t>(1, lengths.max().item<int64_t>());
  torch::Tensor mine = torch::zeros({longest}, torch::kUInt8);
  std::memcpy(mine.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  torch::Tensor all = torch::zeros({world * longest}, on_device.dtype(torch::kUInt8));
  comm.all_gather(mine.to(comm.device()), all);
  all = all.cpu();
  std::vector<std::string> out;
  for (int r = 0; r < world; ++r) {
    const char* begin = reinterpret_cast<const char*>(all.data_ptr<uint8_t>()) + r * longest;
    out.emplace_back(begin, static_cast<size_t>(lengths[r].item<int64_t>()));
  }
  return out;
}

bool BroadcastOk(Communicator& comm, bool ok) {
  torch::Tensor flag = torch::tensor({static_cast<int64_t>(ok ? 1 : 0)}, torch::kInt64).to(comm.device());
  comm.broadcast(flag, 0);
  return flag.cpu().item<int64_t>() == 1;
}

}  // namespace headroom::worker
