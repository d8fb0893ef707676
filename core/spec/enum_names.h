// A table of (value, name) for an enum, and the two lookups every such table needs, so a
// name is written once, beside its value.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace headroom::spec {

template <typename Enum>
struct EnumName {
  Enum value;
  const char* name;
};

// The name of `value` in `table`; `otherwise` when the table does not list it.
template <typename Enum, std::size_t N>
const char* NameOf(const EnumName<Enum> (&table)[N], Enum value, const char* otherwise) {
  for (const EnumName<Enum>& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return otherwise;
}

// The value named `name` in `table` (exact, case-sensitive); nullopt for any other name.
template <typename Enum, std::size_t N>
std::optional<Enum> ValueOf(const EnumName<Enum> (&table)[N], const std::string& name) {
  for (const EnumName<Enum>& entry : table) {
    if (name == entry.name) return entry.value;
  }
  return std::nullopt;
}

}  // namespace headroom::spec
