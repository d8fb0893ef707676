#include "worker/tasks/reward.h"

#include <algorithm>
#include <vector>

#include "worker/tasks/tokenizer.h"

namespace headroom::worker {

double ScoreResponse(const std::string& answer, const int64_t* response, int64_t n) {
  std::vector<int64_t> target = CharTokenizer::Encode(answer);
  target.push_back(CharTokenizer::kEos);
  const int64_t* eos = std::find(response, response + n, CharTokenizer::kEos);
  const int64_t length = eos == response + n ? n : (eos - response) + 1;
  const auto target_length = static_cast<int64_t>(target.size());
  if (length == target_length && std::equal(target.begin(), target.end(), response)) return 1.0;
  int64_t matches = 0;
  for (int64_t i = 0; i < std::min(length, target_length); ++i) matches += response[i] == target[i];
  return 0.5 * static_cast<double>(matches) / static_cast<double>(std::max(length, target_length));
}

}  // namespace headroom::worker
