#include "core/guard/guard_history.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <limits>
#include <stdexcept>

namespace headroom::guard {

namespace {

template <typename T>
void Read(const nlohmann::json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  try {
    out = it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument(std::string("guard history JSON: key \"") + key +
                                "\" has the wrong type: " + it->dump());
  }
}

}  // namespace

int GuardHistory::StepsSinceLastRestart(int current_step) const {
  if (last_restart_step < 0) return std::numeric_limits<int>::max();
  return current_step - last_restart_step;
}

void GuardHistory::Record(const Decision& decision) {
  switch (decision.action) {
    case DecisionAction::kRestart:
      ++restarts;
      last_restart_step = decision.step;
      break;
    case DecisionAction::kReshard:
      ++reshards;
      // A reshard relaunches every worker from the checkpoint too; the progress clock
      // restarts, but it does not use up the restart budget.
      last_restart_step = decision.step;
      break;
    case DecisionAction::kShrinkMicroBatch: ++micro_batch_shrinks; last_restart_step = decision.step; break;
    case DecisionAction::kEnableOffload: ++offload_enabled; last_restart_step = decision.step; break;
    case DecisionAction::kDisableOffload: ++offload_disabled; last_restart_step = decision.step; break;
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
  nlohmann::ordered_json j = {
      {"restarts", restarts},
      {"crash_restarts", crash_restarts},
      {"oom_kills", oom_kills},
      {"reshards", reshards},
      {"micro_batch_shrinks", micro_batch_shrinks},
      {"offload_enabled", offload_enabled},
      {"offload_disabled", offload_disabled},
      {"last_restart_step", last_restart_step},
      {"last_action", last_action},
      {"last_action_step", last_action_step},
  };
  return j.dump();
}

GuardHistory GuardHistory::FromJson(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(std::string("guard history JSON: not JSON: ") + e.what());
  }
  if (!j.is_object()) throw std::invalid_argument("guard history JSON: expected an object, got " + j.dump());
  static const char* kKeys[] = {"restarts", "crash_restarts", "oom_kills", "reshards",
                                "micro_batch_shrinks", "offload_enabled", "offload_disabled",
                                "last_restart_step", "last_action", "last_action_step"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool known = false;
    for (const char* k : kKeys) known |= it.key() == k;
    if (!known) throw std::invalid_argument("guard history JSON: unknown key \"" + it.key() + "\"");
  }
  GuardHistory h;
  Read(j, "restarts", h.restarts);
  Read(j, "crash_restarts", h.crash_restarts);
  Read(j, "oom_kills", h.oom_kills);
  Read(j, "reshards", h.reshards);
  Read(j, "micro_batch_shrinks", h.micro_batch_shrinks);
  Read(j, "offload_enabled", h.offload_enabled);
  Read(j, "offload_disabled", h.offload_disabled);
  Read(j, "last_restart_step", h.last_restart_step);
  Read(j, "last_action", h.last_action);
  Read(j, "last_action_step", h.last_action_step);
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
