#include "core/spec/closest_name.h"

#include <algorithm>
#include <cctype>

namespace headroom::spec {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Levenshtein distance, case-insensitive (a typo in case is the commonest of all).
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::optional<std::string> ClosestName(const std::string& word,
                                       const std::vector<std::string>& candidates) {
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
