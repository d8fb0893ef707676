#include "core/memory/micro_batches.h"

#include <algorithm>
#include <numeric>

namespace headroom::memory {

int64_t PaddedTokens(const std::vector<SequenceLength>& lengths, const std::vector<int64_t>& rows) {
  int64_t prompt = 0, response = 0;
  for (int64_t r : rows) {
    prompt = std::max(prompt, lengths[static_cast<size_t>(r)].prompt);
    response = std::max(response, lengths[static_cast<size_t>(r)].response);
  }
  return static_cast<int64_t>(rows.size()) * (prompt + response);
}

std::vector<std::vector<int64_t>> SplitMicroBatches(const std::vector<SequenceLength>& lengths, int64_t max_rows,
                                                    int64_t max_tokens) {
  max_rows = std::max<int64_t>(1, max_rows);
  const int64_t n = static_cast<int64_t>(lengths.size());
  std::vector<std::vector<int64_t>> groups;
  if (max_tokens <= 0) {
    for (int64_t start = 0; start < n; start += max_rows) {
      groups.emplace_back(static_cast<size_t>(std::min(max_rows, n - start)));
      std::iota(groups.back().begin(), groups.back().end(), start);
    }
    return groups;
  }
  // Longest first; ties in row order, so the split is the same on every run.
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return lengths[static_cast<size_t>(a)].total() > lengths[static_cast<size_t>(b)].total();
  });
  std::vector<int64_t> current;
  int64_t prompt = 0, response = 0;
  for (int64_t r : order) {
    const SequenceLength& l = lengths[static_cast<size_t>(r)];
    const int64_t p = std::max(prompt, l.prompt), q = std::max(response, l.response);
    const int64_t rows = static_cast<int64_t>(current.size()) + 1;
    if (!current.empty() && (rows > max_rows || rows * (p + q) > max_tokens)) {
      groups.push_back(std::move(current));
      current.clear();
      prompt = l.prompt;
      response = l.response;
    } else {
      prompt = p;
      response = q;
    }
    current.push_back(r);
  }
  if (!current.empty()) groups.push_back(std::move(current));
  for (auto& g : groups) std::sort(g.begin(), g.end());
  return groups;
}

}  // namespace headroom::memory
