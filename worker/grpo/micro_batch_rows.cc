#include <spdlog/spdlog.h>

#include "worker/grpo/micro_batch_rows.h"

#include <algorithm>
#include <numeric>

namespace headroom::worker {

std::vector<memory::SequenceLength> SequenceLengths(const torch::Tensor& response_mask,
                                                    const torch::Tensor& prompt_padding, int64_t prompt_length) {
  const int64_t n = response_mask.size(0), width = response_mask.size(1);
  // 1-based position of each row's last masked-in token (0: none).
  const auto positions =
      torch::arange(1, width + 1, torch::TensorOptions().dtype(torch::kInt64).device(response_mask.device()));
  const auto response = (response_mask.gt(0).to(torch::kInt64) * positions).amax(1);
  const auto prompt = prompt_padding.defined() ? prompt_length - prompt_padding.to(response.device(), torch::kInt64)
                                               : torch::full({n}, prompt_length, response.options());
  const auto host = torch::stack({prompt, response}).to(torch::kCPU).contiguous();
  const auto h = host.accessor<int64_t, 2>();
  std::vector<memory::SequenceLength> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = {h[0][i], h[1][i]};
  return out;
}

MicroBatchPlan PlanMicroBatches(const std::vector<memory::SequenceLength>& lengths, int64_t max_rows,
                                int64_t max_tokens, const std::vector<int64_t>& rows) {
  std::vector<int64_t> all = rows;
  if (all.empty()) {
    all.resize(lengths.size());
    std::iota(all.begin(), all.end(), 0);
  }
  std::vector<memory::SequenceLength> sub;
  sub.reserve(all.size());
  for (int64_t r : all) sub.push_back(lengths[static_cast<size_t>(r)]);
  MicroBatchPlan plan;
  plan.groups = memory::SplitMicroBatches(sub, max_rows, max_tokens);
  for (auto& g : plan.groups) {
    for (auto& r : g) r = all[static_cast<size_t>(r)];
  }
  plan.runs = static_cast<int64_t>(plan.groups.size());
  if (!all.empty()) {
    plan.filler = *std::min_element(all.begin(), all.end(), [&](int64_t a, int64_t b) {
      return lengths[static_cast<size_t>(a)].total() < lengths[static_cast<size_t>(b)].total();
    });
  }
  return plan;
}

void KeepRunsInStep(std::vector<MicroBatchPlan*> plans, Communicator& comm) {
  if (plans.empty() || comm.world_size() < 2) return;
  auto runs = torch::empty({static_cast<int64_t>(plans.size())}, torch::kFloat64);
  for (size_t i = 0; i < plans.size(); ++i) runs[static_cast<int64_t>(i)] = static_cast<double>(plans[i]->runs);
  runs = runs.to(comm.device());
  comm.all_reduce(runs, ReduceOp::kMax);
  runs = runs.to(torch::kCPU);
  for (size_t i = 0; i < plans.size(); ++i)
    plans[i]->runs = static_cast<int64_t>(runs[static_cast<int64_t>(i)].item<double>());
}

TrimmedRows TrimRows(const torch::Tensor& sequences, const torch::Tensor& prompt_padding, int64_t prompt_length,
                     const std::vector<memory::SequenceLength>& lengths, const std::vector<int64_t>& rows) {
  TrimmedRows out;
  for (int64_t r : rows) {
    out.prompt_length = std::max(out.prompt_length, lengths[static_cast<size_t>(r)].prompt);
    out.response_width = std::max(out.response_width, lengths[static_cast<size_t>(r)].response);
  }
  // A row of no prompt or no response still needs one position before and one after
  // the prompt's end: the first response token is predicted from the last prompt token.
  out.prompt_length = std::max<int64_t>(out.prompt_length, 1);
  out.response_width = std::max<int64_t>(out.response_width, 1);
  const int64_t cut = prompt_length - out.prompt_length;
  auto index = torch::tensor(rows, torch::kInt64);
  // Pinned, so the copy to the device is queued without the host waiting for it.
  if (sequences.is_cuda()) index = index.pin_memory().to(sequences.device(), /*non_blocking=*/true);
  out.index = index;
  out.sequences = sequences.index_select(0, index).narrow(1, cut, out.prompt_length + out.response_width);
  if (prompt_padding.defined()) {
    out.prompt_padding = prompt_padding.index_select(0, index.to(prompt_padding.device())) - cut;
  }
  return out;
}

}  // namespace headroom::worker
