#include "core/guard/decision.h"

#include <nlohmann/json.hpp>

#include <stdexcept>

namespace headroom::guard {

namespace {

struct ActionName {
  DecisionAction action;
  const char* name;
};

constexpr ActionName kNames[] = {
    {DecisionAction::kNone, "none"},
    {DecisionAction::kRestart, "restart"},
    {DecisionAction::kReshard, "reshard"},
    {DecisionAction::kShrinkMicroBatch, "shrinkMicroBatch"},
    {DecisionAction::kDisableOffload, "disableOffload"},
    {DecisionAction::kEnableOffload, "enableOffload"},
    {DecisionAction::kFail, "fail"},
};

template <typename T>
nlohmann::ordered_json Optional(const std::optional<T>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

// Reads `key` of type T when present and not null; throws naming the key otherwise.
template <typename T>
void Read(const nlohmann::json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  try {
    out = it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument(std::string("decision JSON: key \"") + key + "\" has the wrong type: " +
                                it->dump());
  }
}

template <typename T>
void ReadOptional(const nlohmann::json& j, const char* key, std::optional<T>& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  T v{};
  Read(j, key, v);
  out = v;
}

}  // namespace

const char* DecisionActionName(DecisionAction a) {
  for (const ActionName& n : kNames) {
    if (n.action == a) return n.name;
  }
  return "none";
}

std::optional<DecisionAction> DecisionActionFromName(const std::string& name) {
  for (const ActionName& n : kNames) {
    if (name == n.name) return n.action;
  }
  return std::nullopt;
}

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
  nlohmann::ordered_json j = {
      {"action", DecisionActionName(action)},
      {"resource", resource},
      {"reason", reason},
      {"step", step},
      {"forecast_peak_bytes", forecast_peak_bytes},
      {"steps_to_limit", steps_to_limit},
      {"growth_bytes_per_step", growth_bytes_per_step},
      {"memory_class", memory_class},
      {"target_workers", Optional(target_workers)},
      {"target_micro_batch_size", Optional(target_micro_batch_size)},
      {"target_offload_params", Optional(target_offload_params)},
      {"target_offload_optimizer", Optional(target_offload_optimizer)},
  };
  return j.dump();
}

Decision Decision::FromJson(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(std::string("decision JSON: not JSON: ") + e.what());
  }
  if (!j.is_object()) throw std::invalid_argument("decision JSON: expected an object, got " + j.dump());
  Decision d;
  std::string action;
  Read(j, "action", action);
  if (action.empty()) throw std::invalid_argument("decision JSON: key \"action\" is missing");
  auto parsed = DecisionActionFromName(action);
  if (!parsed) throw std::invalid_argument("decision JSON: key \"action\": unknown action \"" + action + "\"");
  d.action = *parsed;
  Read(j, "resource", d.resource);
  Read(j, "reason", d.reason);
  Read(j, "step", d.step);
  Read(j, "forecast_peak_bytes", d.forecast_peak_bytes);
  Read(j, "steps_to_limit", d.steps_to_limit);
  Read(j, "growth_bytes_per_step", d.growth_bytes_per_step);
  Read(j, "memory_class", d.memory_class);
  ReadOptional(j, "target_workers", d.target_workers);
  ReadOptional(j, "target_micro_batch_size", d.target_micro_batch_size);
  ReadOptional(j, "target_offload_params", d.target_offload_params);
  ReadOptional(j, "target_offload_optimizer", d.target_offload_optimizer);
  return d;
}

}  // namespace headroom::guard
