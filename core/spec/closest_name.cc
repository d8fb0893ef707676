#include "core/spec/closest_name.h"

#include <algorithm>
#include <cctype>

namespace headroom::spec {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Edit distance counting a swap of neighbours as one edit ("sepc" -> "spec"), case-
// insensitive (a typo in case is the commonest of all).
size_t EditDistance(const std::string& a, const std::string& b) {
  auto same = [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
  };
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (same(a[i - 1], b[j - 1]) ? 0 : 1)});
      if (i > 1 && j > 1 && same(a[i - 1], b[j - 2]) && same(a[i - 2], b[j - 1])) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::optional<std::string> ClosestName(const std::string& word, const std::vector<std::string>& candidates) {
  if (word.size() > 64) return std::nullopt;  // nobody misspells a field that long
  const std::string lower = Lower(word);
  for (const std::string& c : candidates) {
    if (Lower(c) == lower) return c;
  }
  const size_t allowed = word.size() >= 10 ? 3 : word.size() >= 5 ? 2 : 1;
  std::optional<std::string> best;
  size_t best_distance = allowed + 1;
  for (const std::string& c : candidates) {
    const size_t d = EditDistance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates) {
  std::optional<std::string> close = ClosestName(word, candidates);
  return close ? " (did you mean " + *close + "?)" : "";
}

}  // namespace headroom::spec
