#include "operator/local/run_summary.h"

#include <cstdio>

#include <nlohmann/json.hpp>

namespace headroom::local {

namespace {

// One terminal line: a reason quoting a worker's output may carry newlines, carriage
// returns or escape sequences, which would break the list or redraw lines above it.
std::string OneLine(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20 || u == 0x7f ? ' ' : c);
  }
  return out;
}

}  // namespace

RunSummary RunSummary::From(const runtime::JobStatus& s, const std::string& job_name, double wall_seconds) {
  RunSummary r;
  r.job_name = job_name;
  r.phase = runtime::JobPhaseName(s.phase);
  r.message = s.message;
  r.steps = s.step;
  r.total_steps = s.total_steps;
  r.restarts = s.restarts;
  r.reshards = s.reshards;
  r.oom_kills = s.oom_kills;
  r.gpu_oom_kills = s.gpu_oom_kills;
  r.steps_lost = s.steps_lost;
  r.final_reward = s.final_reward;
  r.wall_seconds = wall_seconds;
  r.actions = s.actions;
  return r;
}

std::string RunSummary::ToJson() const {
  nlohmann::json actions = nlohmann::json::array();
  for (const runtime::ActionRecord& a : this->actions) {
    actions.push_back({{"step", a.step}, {"type", runtime::ToWireName(a.type)}, {"reason", a.reason}});
  }
  nlohmann::json j = {
      {"steps", steps},
      {"restarts", restarts},
      {"reshards", reshards},
      {"oom_kills", oom_kills},
      {"steps_lost", steps_lost},
      {"final_reward", final_reward ? nlohmann::json(*final_reward) : nlohmann::json(nullptr)},
      {"wall_seconds", wall_seconds},
      {"actions", actions},
  };
  // A failed run says why, in the words its first failure line used (a worker's own
  // refusal leads), so a script reading the summary needs no log.
  if (phase == "Failed" && !message.empty()) j["error"] = message;
  if (export_dir) j["export"] = export_dir->empty() ? nlohmann::json(nullptr) : nlohmann::json(*export_dir);
  return j.dump(2) + "\n";
}

void RunSummary::Print(std::ostream& out) const {
  char reward[32] = "-";
  if (final_reward) std::snprintf(reward, sizeof reward, "%.3f", *final_reward);
  char wall[32];
  std::snprintf(wall, sizeof wall, "%.1f s", wall_seconds);
  out << "\n" << job_name << ": " << phase;
  if (!message.empty()) out << " — " << message;
  out << "\n"
      << "  steps         " << steps << " / " << total_steps << "\n"
      << "  restarts      " << restarts << "\n"
      << "  reshards      " << reshards << "\n"
      << "  OOM kills     " << oom_kills
      << (gpu_oom_kills > 0 ? " (" + std::to_string(gpu_oom_kills) + " GPU out of memory)" : std::string()) << "\n"
      << "  steps lost    " << steps_lost << "\n"
      << "  final reward  " << reward << "\n"
      << "  wall time     " << wall << "\n";
  // Every action the JSON lists, one line each.
  out << "  actions       " << actions.size() << (actions.empty() ? "\n" : ":\n");
  for (const runtime::ActionRecord& a : actions) {
    out << "    step " << a.step << "  " << OneLine(runtime::ToWireName(a.type)) << ": " << OneLine(a.reason) << "\n";
  }
  if (!trace_csv.empty()) out << "  memory series " << trace_csv << "\n";
  if (!chart_svg.empty()) out << "  memory chart  " << chart_svg << "\n";
  if (export_dir) out << "  export        " << (export_dir->empty() ? "none (the job did not finish)" : *export_dir) << "\n";
}

}  // namespace headroom::local
