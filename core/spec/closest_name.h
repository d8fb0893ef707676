// "Did you mean ...?" for misspelled field names and enum values.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace headroom::spec {

// The candidate `word` most likely misspells: equal ignoring case, or within a small edit
// distance (at most 1 for short words, 2 from 5 characters, 3 from 10). nullopt when none
// is close enough to suggest.
std::optional<std::string> ClosestName(const std::string& word, const std::vector<std::string>& candidates);

// " (did you mean groupSize?)" or "" — ready to append to a message.
std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace headroom::spec
