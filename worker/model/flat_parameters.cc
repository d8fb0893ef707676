#include <spdlog/spdlog.h>

#include "worker/model/flat_parameters.h"

#include <stdexcept>

namespace headroom::worker {

FlatParameters::FlatParameters(const NamedTensors& params) {
  if (params.empty()) throw std::invalid_argument("flat parameters: no parameters");
  int64_t total = 0;
  for (const auto& [name, p] : params) total += p.numel();
  const auto& first = params.front().second;
  flat_ = torch::empty({total}, first.options().requires_grad(false));
  flat_grad_ = torch::zeros({total}, first.options().requires_grad(false));
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (const auto& [name, p] : params) {
    if (p.scalar_type() != first.scalar_type() || p.device() != first.device()) {
      throw std::invalid_argument("flat parameters: " + name + " differs in dtype or device from " +
                                  params.front().first);
    }
    const int64_t n = p.numel();
    auto view = flat_.narrow(0, offset, n).view(p.sizes());
    view.copy_(p);
    // set_data keeps the Parameter object (the optimizer and module hold it) but swaps
    // its storage for the view into the flat buffer.
    torch::Tensor param = p;
    param.set_data(view);
    param.mutable_grad() = flat_grad_.narrow(0, offset, n).view(p.sizes());
    slots_.push_back({name, param, offset, n});
    offset += n;
  }
}

std::vector<torch::Tensor> FlatParameters::parameters() const {
  std::vector<torch::Tensor> out;
  out.reserve(slots_.size());
  for (const auto& s : slots_) out.push_back(s.param);
  return out;
}

}  // namespace headroom::worker
