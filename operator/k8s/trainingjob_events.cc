// Events and the guard-action metric: what the operator tells `kubectl describe` and
// Prometheus about each action the reconciler recorded and each phase it reached.
#include <spdlog/spdlog.h>

#include <cctype>
#include <chrono>
#include <thread>

#include "core/spec/training_job.h"
#include "operator/k8s/trainingjob_controller.h"
#include "operator/k8s/trainingjob_job_entry.h"
#include "operator/kube/resource_client.h"
#include "operator/runtime/action_type.h"

namespace headroom::k8s {

using nlohmann::json;

namespace {

// Eight characters of the uid for Event names: the tail, which differs between two
// incarnations of a job with the same name on any server (real uids are random; the
// test server counts).
std::string Uid8(const json& object) {
  const std::string uid = kube::Uid(object);
  return uid.size() > 8 ? uid.substr(uid.size() - 8) : uid;
}

// Event reason and metric labels for an action the reconciler recorded.
struct ActionLabels {
  std::string event_reason;
  std::string action;  // headroom_operator_guard_actions_total{action}
  std::string reason;  // ... {reason}: why, in one word (bounded cardinality)
  bool warning = false;
};

ActionLabels LabelsFor(runtime::ActionType type) {
  using runtime::ActionType;
  switch (type) {
    case ActionType::kRestart: return {"GuardRestart", "restart", "memoryGuard", false};
    case ActionType::kReshard: return {"Reshard", "reshard", "memoryGuard", false};
    case ActionType::kShrinkMicroBatch: return {"ShrinkMicroBatch", "shrinkMicroBatch", "memoryGuard", false};
    case ActionType::kDisableOffload: return {"DisableOffload", "disableOffload", "memoryGuard", false};
    case ActionType::kEnableOffload: return {"EnableOffload", "enableOffload", "memoryGuard", false};
    case ActionType::kRestartAfterOOMKill: return {"OOMKilled", "restart", "oomKill", true};
    case ActionType::kRestartAfterGpuOOM: return {"GpuOutOfMemory", "restart", "gpuOom", true};
    case ActionType::kRestartAfterCrash: return {"CrashRestart", "restart", "crash", true};
    case ActionType::kResume: return {"Resumed", "restart", "drained", false};
    case ActionType::kScale: return {"Reshard", "reshard", "scale", false};
    case ActionType::kSuspend: return {"Suspended", "suspend", "user", false};
    case ActionType::kUnsuspend: return {"Resumed", "resume", "user", false};
    case ActionType::kFail: return {"Failed", "fail", "gaveUp", true};
  }
  const std::string name = runtime::ToWireName(type);
  return {name, name, "other", false};
}

}  // namespace

void TrainingJobController::Event(const json& object, const std::string& name_suffix, const std::string& type,
                                  const std::string& reason, const std::string& message) {
  const std::string ns = kube::Namespace(object);
  const std::string now = kube::FormatTime(std::chrono::system_clock::now());
  // A name that is a function of what happened: a retry, or a second operator replaying
  // it after a restart, answers AlreadyExists instead of a duplicate Event. Lowercase:
  // names are RFC 1123 subdomains, and action types are camelCase.
  std::string suffix = name_suffix;
  for (char& ch : suffix) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  json event{{"apiVersion", "v1"},
             {"kind", "Event"},
             {"metadata", {{"name", kube::Name(object) + "." + Uid8(object) + "." + suffix}, {"namespace", ns}}},
             {"involvedObject",
              {{"apiVersion", spec::kApiVersion},
               {"kind", spec::kKind},
               {"name", kube::Name(object)},
               {"namespace", ns},
               {"uid", kube::Uid(object)}}},
             {"reason", reason},
             {"message", message.substr(0, 1024)},
             {"type", type},
             {"source", {{"component", "headroom-operator"}}},
             {"reportingComponent", "headroom-operator"},
             {"firstTimestamp", now},
             {"lastTimestamp", now},
             {"count", 1}};
  kube::ResourceClient events(*client_, kube::resources::kEvents);
  for (int attempt = 0; attempt < 5; ++attempt) {
    try {
      events.Create(ns, event);
      ++events_emitted_;
      return;
    } catch (const kube::ApiError& e) {
      if (e.IsAlreadyExists()) return;
      if (e.code() != 0 && e.code() != 429 && e.code() < 500) {
        spdlog::warn("event {} for {}: {}", reason, kube::KeyOf(object), e.what());
        return;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10 << attempt));
  }
  spdlog::warn("event {} for {} not recorded: the API server kept failing", reason, kube::KeyOf(object));
}

void TrainingJobController::ReportActions(JobEntry& entry, const json& object) {
  const runtime::JobStatus& s = entry.reconciler->status();
  for (size_t i = entry.actions_reported; i < s.actions.size(); ++i) {
    const runtime::ActionRecord& a = s.actions[i];
    const ActionLabels l = LabelsFor(a.type);
    metrics_->CountGuardAction(l.action, l.reason);
    std::string message = "step " + std::to_string(a.step) + ": " + a.reason;
    if (runtime::IsUnplannedEnd(a.type)) {
      message += " (steps lost so far: " + std::to_string(s.steps_lost) + ")";
    }
    Event(object, std::to_string(s.generation) + "-" + runtime::ToWireName(a.type), l.warning ? "Warning" : "Normal", l.event_reason,
          message);
  }
  entry.actions_reported = s.actions.size();
  const std::string phase = runtime::JobPhaseName(s.phase);
  if (phase != entry.phase_reported) {
    if (s.phase == runtime::JobPhase::kSucceeded) {
      Event(object, "succeeded", "Normal", "Succeeded",
            s.message + "; " + std::to_string(s.restarts) + " restart(s), " + std::to_string(s.reshards) +
                " reshard(s), " + std::to_string(s.oom_kills) + " OOM kill(s), " + std::to_string(s.steps_lost) +
                " step(s) lost");
    } else if (s.phase == runtime::JobPhase::kSuspended &&
               (s.actions.empty() || s.actions.back().type != runtime::ActionType::kSuspend)) {
      Event(object, "suspended-" + std::to_string(s.generation), "Normal", "Suspended", s.message);
    } else if (s.phase == runtime::JobPhase::kFailed && (s.actions.empty() || s.actions.back().type != runtime::ActionType::kFail)) {
      Event(object, "failed", "Warning", "Failed", s.message);
    } else if (s.phase == runtime::JobPhase::kPending || s.phase == runtime::JobPhase::kRunning) {
      if (s.generation == 1 && entry.phase_reported.empty()) {
        Event(object, "launched", "Normal", "Launched",
              "generation 1 with " + std::to_string(s.workers) + " worker(s)");
      }
    }
    entry.phase_reported = phase;
  }
}

}  // namespace headroom::k8s
