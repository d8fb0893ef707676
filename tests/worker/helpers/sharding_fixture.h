// Test support for the sharding tests: a small model of odd-sized tensors (so padding
// and ranges that split a tensor are exercised) and a per-rank loss whose gradient
// depends on the current parameters (so a stage-3 forward on stale or missing
// parameters shows up as a wrong result).
#pragma once

#include <torch/torch.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace headroom::testing {

using NamedParams = std::vector<std::pair<std::string, torch::Tensor>>;

// Parameters of shapes {5,7}, {3}, {11}, {2,2} (53 elements), drawn from `seed`.
inline NamedParams MakeOddParams(uint64_t seed) {
  torch::manual_seed(seed);
  NamedParams out;
  const std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
      {"a.weight", {5, 7}}, {"a.bias", {3}}, {"b.weight", {11}}, {"c.weight", {2, 2}}};
  for (const auto& [name, shape] : shapes) out.emplace_back(name, torch::randn(shape).requires_grad_(true));
  return out;
}

// Rank `rank`'s loss at step `step`: sum(c * p + 0.5 * a * p^2) over every parameter,
// gradient c + a p. Step 2's scale keeps the global norm under 1 (no clipping), the
// others clip.
inline torch::Tensor RankLoss(const NamedParams& params, int step, int rank) {
  const double scale = step == 2 ? 0.003 : 0.5 + 0.1 * step;
  const double a = 0.1 * (rank + 1);
  torch::Tensor loss;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& p = params[i].second;
    auto c = torch::sin(torch::arange(p.numel(), torch::kFloat32) * (step + 1) + rank * 0.37 + static_cast<double>(i))
                 .view(p.sizes()) *
             scale;
    auto term = (c * p).sum() + 0.5 * a * (p * p).sum();
    loss = loss.defined() ? loss + term : term;
  }
  return loss;
}

// All parameters flattened and concatenated (detached copy).
inline torch::Tensor Concat(const NamedParams& params) {
  std::vector<torch::Tensor> parts;
  for (const auto& [name, p] : params) parts.push_back(p.detach().reshape({-1}));
  return torch::cat(parts);
}

inline void Expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

// What WriteBytes appended to `path`, as fp32 values (plain C++: a parent process that
// forks ranks reads them without starting LibTorch).
inline std::vector<float> ReadFloats(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string bytes{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

inline void WriteBytes(const std::string& path, const torch::Tensor& t) {
  auto c = t.contiguous().cpu();
  std::ofstream f(path, std::ios::binary | std::ios::app);
  f.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * c.element_size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

}  // namespace headroom::testing
