// SpecError formatting and guard action names; the rest of training_job.h lives in
// training_job_{parser,defaults,validator,serializer}.cc and run_definition_hash.cc.
#include "core/spec/training_job.h"

#include "core/base/utf8.h"
#include "core/spec/enum_names.h"

namespace headroom::spec {
namespace {

#define HEADROOM_GUARD_ACTION_NAME(enumerator, name) {GuardAction::enumerator, name},
constexpr EnumName<GuardAction> kGuardActionNames[] = {HEADROOM_GUARD_ACTIONS(HEADROOM_GUARD_ACTION_NAME)};
#undef HEADROOM_GUARD_ACTION_NAME

// Paths and messages quote user text; control characters and bytes that are not UTF-8
// are escaped, so every error stays on one line of `headroom validate`'s output and is
// valid UTF-8 (the operator puts it into a status condition).
std::string OneLine(const std::string& text) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    const char c = text[pos];
    const auto u = static_cast<unsigned char>(c);
    const size_t n = utf8::SequenceLength(text, pos);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (n == 0 || u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out.append(text, pos, n);
      pos += n;
      continue;
    }
    ++pos;
  }
  return out;
}

}  // namespace

std::string SpecError::ToString() const {
  std::string out = (path.empty() ? std::string("<document>") : OneLine(path)) + ": " + OneLine(message);
  if (line > 0) {
    out += " (line " + std::to_string(line);
    if (column > 0) out += ", column " + std::to_string(column);
    out += ")";
  }
  return out;
}

const char* GuardActionName(GuardAction a) { return NameOf(kGuardActionNames, a, "unknown"); }

std::optional<GuardAction> GuardActionFromName(const std::string& name) { return ValueOf(kGuardActionNames, name); }

std::vector<std::string> GuardActionNames() {
  std::vector<std::string> names;
  for (const auto& entry : kGuardActionNames) names.emplace_back(entry.name);
  return names;
}

}  // namespace headroom::spec
