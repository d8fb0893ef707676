// The guard's small JSON objects (a Decision, the GuardHistory) are written and read from
// one list of (key, member) per type; these are the pieces both directions share, with
// errors that name the object ("decision JSON") and the key.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace headroom::guard::json_fields {

// `text` parsed as a JSON object. Throws std::invalid_argument "<what>: not JSON: ..." or
// "<what>: expected an object, got ...".
nlohmann::json ParseObject(const std::string& text, const std::string& what);

// The JSON value of a member; an empty optional is null.
template <typename T>
nlohmann::ordered_json Value(const T& member) {
  return nlohmann::ordered_json(member);
}
template <typename T>
nlohmann::ordered_json Value(const std::optional<T>& member) {
  return member ? nlohmann::ordered_json(*member) : nlohmann::ordered_json(nullptr);
}

// Sets `out` from `key` when present and not null, and leaves it as it is otherwise.
// Throws std::invalid_argument "<what>: key "KEY" has the wrong type: VALUE".
template <typename T>
void Read(const nlohmann::json& j, const std::string& what, const char* key, T& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  try {
    out = it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument(what + ": key \"" + key + "\" has the wrong type: " + it->dump());
  }
}
template <typename T>
void Read(const nlohmann::json& j, const std::string& what, const char* key, std::optional<T>& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  T value{};
  Read(j, what, key, value);
  out = value;
}

}  // namespace headroom::guard::json_fields
