#include "core/guard/decision.h"

#include <nlohmann/json.hpp>

#include <stdexcept>

#include "core/guard/json_fields.h"
#include "core/spec/enum_names.h"

namespace headroom::guard {

namespace {

constexpr spec::EnumName<DecisionAction> kNames[] = {
    {DecisionAction::kNone, "none"},
    {DecisionAction::kRestart, "restart"},
    {DecisionAction::kReshard, "reshard"},
    {DecisionAction::kShrinkMicroBatch, "shrinkMicroBatch"},
    {DecisionAction::kDisableOffload, "disableOffload"},
    {DecisionAction::kEnableOffload, "enableOffload"},
    {DecisionAction::kFail, "fail"},
};

constexpr const char* kWhat = "decision JSON";

// One list of (key, member) for both directions, so writing and reading cannot drift;
// "action" comes first and is written by name.
template <typename D, typename Fn>
void ForEachField(D& d, Fn&& fn) {
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
  fn("target_offload_params", d.target_offload_params);
  fn("target_offload_optimizer", d.target_offload_optimizer);
}

}  // namespace

const char* DecisionActionName(DecisionAction a) { return spec::NameOf(kNames, a, "none"); }

std::optional<DecisionAction> DecisionActionFromName(const std::string& name) { return spec::ValueOf(kNames, name); }

DecisionAction FromGuardAction(spec::GuardAction a) {
  switch (a) {
    case spec::GuardAction::kRestart: return DecisionAction::kRestart;
    case spec::GuardAction::kReshard: return DecisionAction::kReshard;
    case spec::GuardAction::kShrinkMicroBatch: return DecisionAction::kShrinkMicroBatch;
    case spec::GuardAction::kDisableOffload: return DecisionAction::kDisableOffload;
    case spec::GuardAction::kEnableOffload: return DecisionAction::kEnableOffload;
  }
  return DecisionAction::kNone;
}

std::optional<spec::GuardAction> ToGuardAction(DecisionAction a) {
  switch (a) {
    case DecisionAction::kRestart: return spec::GuardAction::kRestart;
    case DecisionAction::kReshard: return spec::GuardAction::kReshard;
    case DecisionAction::kShrinkMicroBatch: return spec::GuardAction::kShrinkMicroBatch;
    case DecisionAction::kDisableOffload: return spec::GuardAction::kDisableOffload;
    case DecisionAction::kEnableOffload: return spec::GuardAction::kEnableOffload;
    case DecisionAction::kNone:
    case DecisionAction::kFail: return std::nullopt;
  }
  return std::nullopt;
}

std::string Decision::ToJson() const {
  nlohmann::ordered_json j = {{"action", DecisionActionName(action)}};
  ForEachField(*this, [&](const char* key, const auto& member) { j[key] = json_fields::Value(member); });
  return j.dump();
}

Decision Decision::FromJson(const std::string& text) {
  const nlohmann::json j = json_fields::ParseObject(text, kWhat);
  Decision d;
  std::string action;
  json_fields::Read(j, kWhat, "action", action);
  if (action.empty()) throw std::invalid_argument("decision JSON: key \"action\" is missing");
  auto parsed = DecisionActionFromName(action);
  if (!parsed) throw std::invalid_argument("decision JSON: key \"action\": unknown action \"" + action + "\"");
  d.action = *parsed;
  ForEachField(d, [&](const char* key, auto& member) { json_fields::Read(j, kWhat, key, member); });
  return d;
}

}  // namespace headroom::guard
