#include <spdlog/spdlog.h>

#include "worker/sharding/flat_layout.h"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace headroom::worker {

FlatRange Intersect(FlatRange a, FlatRange b) {
  FlatRange r{std::max(a.begin, b.begin), std::min(a.end, b.end)};
  if (r.end < r.begin) r.end = r.begin;
  return r;
}

FlatLayout::FlatLayout(const std::vector<std::pair<std::string, torch::Tensor>>& params, int world) : world_(world) {
  if (world < 1) throw std::invalid_argument("flat layout: world size must be >= 1, got " + std::to_string(world));
  if (params.empty()) throw std::invalid_argument("flat layout: no parameters");
  std::set<std::string> seen;
  for (const auto& [name, p] : params) {
    if (!seen.insert(name).second) throw std::invalid_argument("flat layout: parameter " + name + " appears twice");
    if (!p.defined()) throw std::invalid_argument("flat layout: parameter " + name + " is undefined");
    FlatSlot slot;
    slot.name = name;
    slot.shape = p.sizes().vec();
    slot.offset = numel_;
    slot.numel = p.numel();
    numel_ += slot.numel;
    slots_.push_back(std::move(slot));
  }
  padded_numel_ = (numel_ + world - 1) / world * world;
}

FlatRange FlatLayout::Shard(int rank) const {
  if (rank < 0 || rank >= world_) {
    throw std::out_of_range("flat layout: rank " + std::to_string(rank) + " outside world of " +
                            std::to_string(world_));
  }
  const int64_t s = shard_numel();
  return {rank * s, (rank + 1) * s};
}

}  // namespace headroom::worker
