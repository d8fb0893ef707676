// Reading the supervisors' side of the worker's small JSON records (a termination message,
// a model-fetch line): a field that is missing or of another type leaves the member as it
// was, because a record from a newer or older worker must still be read for what it has.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace headroom::protocol::lenient_json {

inline void ReadString(const nlohmann::json& j, const char* key, std::string& out) {
  if (auto it = j.find(key); it != j.end() && it->is_string()) out = it->get<std::string>();
}

// A number of another kind (1e9) is read as its integer part.
inline void ReadInteger(const nlohmann::json& j, const char* key, int64_t& out) {
  if (auto it = j.find(key); it != j.end() && it->is_number()) out = it->get<int64_t>();
}

}  // namespace headroom::protocol::lenient_json
