#include "core/guard/decision.h"

#include <nlohmann/json.hpp>

#include <stdexcept>

#include "core/guard/json_fields.h"
#include "core/spec/enum_names.h"

namespace headroom::guard {

namespace {

#define HEADROOM_DECISION_ACTION_NAME(enumerator, name) {DecisionAction::enumerator, name},
constexpr spec::EnumName<DecisionAction> kNames[] = {
    {DecisionAction::kNone, "none"},
    HEADROOM_GUARD_ACTIONS(HEADROOM_DECISION_ACTION_NAME){DecisionAction::kFail, "fail"},
};
#undef HEADROOM_DECISION_ACTION_NAME

constexpr const char* kDecisionWhat = "decision JSON";

// One list of (key, member) for both directions, so writing and reading cannot drift;
// "action" comes first and is written by name.
template <typename D, typename Fn>
void ForEachDecisionField(D& d, Fn&& fn) {
  fn("resource", d.resource);
  fn("reason", d.reason);
  fn("step", d.step);
  fn("forecast_peak_bytes", d.forecast_peak_bytes);
  fn("steps_to_limit", d.steps_to_limit);
  fn("growth_bytes_per_step", d.growth_bytes_per_step);
  fn("memory_class", d.memory_class);
  fn("level_bytes", d.level_bytes);
  fn("restart_reclaimed_nothing", d.restart_reclaimed_nothing);
  fn("target_workers", d.target_workers);
  fn("target_micro_batch_size", d.target_micro_batch_size);
  fn("target_max_tokens_per_micro_batch", d.target_max_tokens_per_micro_batch);
  fn("target_offload_params", d.target_offload_params);
  fn("target_offload_optimizer", d.target_offload_optimizer);
}

}  // namespace

const char* DecisionActionName(DecisionAction a) { return spec::NameOf(kNames, a, "none"); }

std::optional<DecisionAction> DecisionActionFromName(const std::string& name) { return spec::ValueOf(kNames, name); }

// Both directions from the one list: an action added there converts without an edit here.
DecisionAction FromGuardAction(spec::GuardAction a) {
  switch (a) {
#define HEADROOM_FROM_GUARD_ACTION(enumerator, name) \
  case spec::GuardAction::enumerator: return DecisionAction::enumerator;
    HEADROOM_GUARD_ACTIONS(HEADROOM_FROM_GUARD_ACTION)
#undef HEADROOM_FROM_GUARD_ACTION
  }
  return DecisionAction::kNone;
}

std::optional<spec::GuardAction> ToGuardAction(DecisionAction a) {
  switch (a) {
#define HEADROOM_TO_GUARD_ACTION(enumerator, name) \
  case DecisionAction::enumerator: return spec::GuardAction::enumerator;
    HEADROOM_GUARD_ACTIONS(HEADROOM_TO_GUARD_ACTION)
#undef HEADROOM_TO_GUARD_ACTION
    case DecisionAction::kNone:
    case DecisionAction::kFail: return std::nullopt;
  }
  return std::nullopt;
}

std::string Decision::ToJson() const {
  nlohmann::ordered_json j = {{"action", DecisionActionName(action)}};
  ForEachDecisionField(*this, [&](const char* key, const auto& member) { j[key] = json_fields::Value(member); });
  return j.dump();
}

Decision Decision::FromJson(const std::string& text) {
  const nlohmann::json j = json_fields::ParseObject(text, kDecisionWhat);
  Decision d;
  std::string action;
  json_fields::Read(j, kDecisionWhat, "action", action);
  if (action.empty()) throw std::invalid_argument("decision JSON: key \"action\" is missing");
  auto parsed = DecisionActionFromName(action);
  if (!parsed) throw std::invalid_argument("decision JSON: key \"action\": unknown action \"" + action + "\"");
  d.action = *parsed;
  ForEachDecisionField(d, [&](const char* key, auto& member) { json_fields::Read(j, kDecisionWhat, key, member); });
  return d;
}

}  // namespace headroom::guard
