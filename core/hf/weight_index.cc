#include "core/hf/weight_index.h"

#include <nlohmann/json.hpp>
#include <set>

#include "core/files/untrusted_path.h"

namespace headroom::hf {

std::vector<std::string> WeightMapShards(const nlohmann::json& index) {
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    throw WeightIndexError("weight_map: required object");
  }
  std::set<std::string> shards;
  for (const auto& [tensor, shard] : index["weight_map"].items()) {
    if (!shard.is_string())
      throw WeightIndexError("weight_map: the value of " + files::Quoted(tensor) + " is not a string");
    const std::string name = shard.get<std::string>();
    if (std::string why = files::WhyNotRelativeBelow(name); !why.empty()) {
      throw WeightIndexError("weight_map names " + files::Quoted(name) + ", which " + why +
                             " (a shard must be a file below the model directory)");
    }
    shards.insert(name);
  }
  return {shards.begin(), shards.end()};
}

}  // namespace headroom::hf
