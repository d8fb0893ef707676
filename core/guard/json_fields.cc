#include "core/guard/json_fields.h"

namespace headroom::guard::json_fields {

nlohmann::json ParseObject(const std::string& text, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(what + ": not JSON: " + e.what());
  }
  if (!j.is_object()) throw std::invalid_argument(what + ": expected an object, got " + j.dump());
  return j;
}

}  // namespace headroom::guard::json_fields
