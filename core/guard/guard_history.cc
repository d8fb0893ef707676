#include "core/guard/guard_history.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <vector>

#include "core/guard/json_fields.h"

namespace headroom::guard {

namespace {

constexpr const char* kHistoryWhat = "guard history JSON";

// One list of (key, member) for writing, reading and refusing unknown keys.
template <typename History, typename Fn>
void ForEachHistoryField(History& h, Fn&& fn) {
  fn("restarts", h.restarts);
  fn("crash_restarts", h.crash_restarts);
  fn("oom_kills", h.oom_kills);
  fn("reshards", h.reshards);
  fn("micro_batch_shrinks", h.micro_batch_shrinks);
  fn("token_budget_shrinks", h.token_budget_shrinks);
  fn("checkpointing_enabled", h.checkpointing_enabled);
  fn("offload_enabled", h.offload_enabled);
  fn("offload_disabled", h.offload_disabled);
  fn("last_restart_step", h.last_restart_step);
  fn("last_action", h.last_action);
  fn("last_action_step", h.last_action_step);
  fn("guard_restart_step", h.guard_restart_step);
  fn("restart_resource", h.restart_resource);
  fn("restart_level_bytes", h.restart_level_bytes);
  fn("restart_reclaimed_nothing", h.restart_reclaimed_nothing);
}

std::vector<std::string> SplitResources(const std::string& list) {
  std::vector<std::string> out;
  size_t from = 0;
  while (from <= list.size()) {
    const size_t comma = std::min(list.find(',', from), list.size());
    if (comma > from) out.push_back(list.substr(from, comma - from));
    from = comma + 1;
  }
  return out;
}

}  // namespace

int GuardHistory::StepsSinceLastRestart(int current_step) const {
  if (last_restart_step < 0) return std::numeric_limits<int>::max();
  return current_step - last_restart_step;
}

bool GuardHistory::RestartReclaimedNothing(const std::string& resource) const {
  for (const std::string& r : SplitResources(restart_reclaimed_nothing)) {
    if (r == resource) return true;
  }
  return false;
}

void GuardHistory::AddRestartReclaimedNothing(const std::string& resources) {
  for (const std::string& r : SplitResources(resources)) {
    if (RestartReclaimedNothing(r)) continue;
    restart_reclaimed_nothing += (restart_reclaimed_nothing.empty() ? "" : ",") + r;
  }
}

void GuardHistory::Record(const Decision& decision) {
  AddRestartReclaimedNothing(decision.restart_reclaimed_nothing);
  switch (decision.action) {
    case DecisionAction::kRestart:
      ++restarts;
      last_restart_step = decision.step;
      guard_restart_step = decision.step;
      restart_resource = decision.resource;
      restart_level_bytes = decision.level_bytes;
      break;
    case DecisionAction::kReshard:
      ++reshards;
      // A reshard relaunches every worker from the checkpoint too; the progress clock
      // restarts, but it does not use up the restart budget.
      last_restart_step = decision.step;
      break;
    case DecisionAction::kShrinkMicroBatch:
      ++micro_batch_shrinks;
      last_restart_step = decision.step;
      break;
    case DecisionAction::kShrinkTokenBudget:
      ++token_budget_shrinks;
      last_restart_step = decision.step;
      break;
    case DecisionAction::kEnableActivationCheckpointing:
      ++checkpointing_enabled;
      last_restart_step = decision.step;
      break;
    case DecisionAction::kEnableOffload:
      ++offload_enabled;
      last_restart_step = decision.step;
      break;
    case DecisionAction::kDisableOffload:
      ++offload_disabled;
      last_restart_step = decision.step;
      break;
    case DecisionAction::kNone:
    case DecisionAction::kFail: break;
  }
  if (decision.acts()) {
    last_action = DecisionActionName(decision.action);
    last_action_step = decision.step;
  }
}

void GuardHistory::RecordCrashRestart(int checkpoint_step, bool oom_kill) {
  ++restarts;
  ++crash_restarts;
  if (oom_kill) ++oom_kills;
  last_restart_step = checkpoint_step;
  last_action = "restart";
  last_action_step = checkpoint_step;
}

std::string GuardHistory::ToJson() const {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  ForEachHistoryField(*this, [&](const char* key, const auto& member) { j[key] = member; });
  return j.dump();
}

GuardHistory GuardHistory::FromJson(const std::string& text) {
  const nlohmann::json j = json_fields::ParseObject(text, kHistoryWhat);
  GuardHistory h;
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool known = false;
    ForEachHistoryField(h, [&](const char* key, const auto&) { known |= it.key() == key; });
    if (!known) throw std::invalid_argument("guard history JSON: unknown key \"" + it.key() + "\"");
  }
  ForEachHistoryField(h, [&](const char* key, auto& member) { json_fields::Read(j, kHistoryWhat, key, member); });
  return h;
}

GuardHistory GuardHistory::FromEnvironment() {
  const char* text = std::getenv(protocol::kGuardHistoryEnv);
  if (text == nullptr || *text == '\0') return {};
  try {
    return FromJson(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(protocol::kGuardHistoryEnv) + ": " + e.what());
  }
}

}  // namespace headroom::guard
