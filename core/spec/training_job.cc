// SpecError formatting and guard action names; the rest of training_job.h lives in
// training_job_{parser,defaults,validator,serializer}.cc and run_definition_hash.cc.
#include "core/spec/training_job.h"

namespace headroom::spec {
namespace {

constexpr struct {
  GuardAction action;
  const char* name;
} kGuardActionNames[] = {
    {GuardAction::kRestart, "restart"},
    {GuardAction::kReshard, "reshard"},
    {GuardAction::kShrinkMicroBatch, "shrinkMicroBatch"},
    {GuardAction::kDisableOffload, "disableOffload"},
    {GuardAction::kEnableOffload, "enableOffload"},
};

}  // namespace

std::string SpecError::ToString() const {
  std::string out = (path.empty() ? std::string("<document>") : path) + ": " + message;
  if (line > 0) {
    out += " (line " + std::to_string(line);
    if (column > 0) out += ", column " + std::to_string(column);
    out += ")";
  }
  return out;
}

const char* GuardActionName(GuardAction a) {
  for (const auto& entry : kGuardActionNames) {
    if (entry.action == a) return entry.name;
  }
  return "unknown";
}

std::optional<GuardAction> GuardActionFromName(const std::string& name) {
  for (const auto& entry : kGuardActionNames) {
    if (name == entry.name) return entry.action;
  }
  return std::nullopt;
}

std::vector<std::string> GuardActionNames() {
  std::vector<std::string> names;
  for (const auto& entry : kGuardActionNames) names.emplace_back(entry.name);
  return names;
}

}  // namespace headroom::spec
