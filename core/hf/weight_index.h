// The one reader of a model.safetensors.index.json's shard names: the Hub client (what to
// download), the cache (whether a snapshot is complete) and the loader (what to map) all
// take them from here, each name checked as a path from outside (core/files/
// untrusted_path.h) before any of them joins it to a directory.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace headroom::hf {

inline constexpr const char* kWeightsIndexFileName = "model.safetensors.index.json";

// Bad input: the caller adds which file (and repository) it came from.
class WeightIndexError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The shard files `index`'s weight_map names, sorted, each once. Throws WeightIndexError
// "weight_map: required object", "weight_map: the value of \"T\" is not a string" or
// "weight_map names \"NAME\", which is an absolute path" (or has a '..' component, ...).
std::vector<std::string> WeightMapShards(const nlohmann::json& index);

}  // namespace headroom::hf
