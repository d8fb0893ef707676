#include "local/run_summary.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/base/human_bytes.h"

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

// A response as one short quoted line.
std::string Quoted(const std::string& text) {
  std::string line = OneLine(text);
  if (line.size() > 40) line = line.substr(0, 37) + "...";
  return "\"" + line + "\"";
}

// The answers before and after, paired by question, in the order after lists them (then
// any question only before has).
struct AnswerPair {
  std::string question;
  const protocol::HeldOutAnswer* before = nullptr;
  const protocol::HeldOutAnswer* after = nullptr;
};

std::vector<AnswerPair> PairAnswers(const RunSummary::HeldOut& h) {
  std::vector<AnswerPair> pairs;
  auto find = [&](const std::string& q) -> AnswerPair& {
    for (AnswerPair& p : pairs) {
      if (p.question == q) return p;
    }
    pairs.push_back({q});
    return pairs.back();
  };
  for (const protocol::HeldOutAnswer& a : h.answers_after) find(a.question).after = &a;
  for (const protocol::HeldOutAnswer& a : h.answers_before) find(a.question).before = &a;
  return pairs;
}

}  // namespace

void RunSummary::AddHeldOut(const std::vector<protocol::StepRecord>& records) {
  for (const protocol::StepRecord& r : records) {
    if (r.rank != 0) continue;
    if (r.heldout_accuracy_before >= 0) {
      heldout.accuracy_before = r.heldout_accuracy_before;
      heldout.problems = std::max(heldout.problems, r.heldout_problems_before);
      heldout.answers_before = r.heldout_answers_before;
    }
    if (r.heldout_accuracy >= 0 && r.step >= heldout.step_after) {
      heldout.accuracy_after = r.heldout_accuracy;
      heldout.step_after = r.step;
      heldout.problems = r.heldout_problems;
      heldout.answers_after = r.heldout_answers;
    }
  }
}

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
  if (heldout.problems > 0) {
    auto number = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    nlohmann::json answers = nlohmann::json::array();
    for (const AnswerPair& p : PairAnswers(heldout)) {
      answers.push_back({{"question", p.question},
                         {"before", p.before ? nlohmann::json(p.before->response) : nlohmann::json(nullptr)},
                         {"before_correct", p.before ? nlohmann::json(p.before->correct) : nlohmann::json(nullptr)},
                         {"after", p.after ? nlohmann::json(p.after->response) : nlohmann::json(nullptr)},
                         {"after_correct", p.after ? nlohmann::json(p.after->correct) : nlohmann::json(nullptr)}});
    }
    j["heldout"] = {
        {"problems", heldout.problems},
        {"accuracy_before", number(heldout.accuracy_before)},
        {"accuracy_after", number(heldout.accuracy_after)},
        {"step_after", heldout.accuracy_after ? nlohmann::json(heldout.step_after) : nlohmann::json(nullptr)},
        {"answers", answers}};
  }
  // A model's answers may be any bytes: never a summary lost to one.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
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
  if (heldout.problems > 0) {
    const auto& h = heldout;
    out << "  held-out accuracy " << (h.accuracy_before ? Percent(*h.accuracy_before, 1) : std::string("-")) << " -> "
        << (h.accuracy_after ? Percent(*h.accuracy_after, 1) : std::string("-")) << " (" << h.problems << " problems"
        << (h.accuracy_after && h.step_after != total_steps ? ", at step " + std::to_string(h.step_after) : "")
        << (h.accuracy_before ? "" : "; the starting model was not measured") << ")\n";
    const std::vector<AnswerPair> pairs = PairAnswers(h);
    if (!pairs.empty()) out << "  held-out answers, before -> after training:\n";
    auto side = [](const protocol::HeldOutAnswer* a) {
      return a ? Quoted(a->response) + (a->correct ? " right" : " wrong") : std::string("-");
    };
    for (const AnswerPair& p : pairs) {
      out << "    " << Quoted(p.question) << "\n      " << side(p.before) << " -> " << side(p.after) << "\n";
    }
  }
  if (!trace_csv.empty()) out << "  memory series " << trace_csv << "\n";
  if (!chart_svg.empty()) out << "  memory chart  " << chart_svg << "\n";
  if (!training_svg.empty()) out << "  training chart " << training_svg << "\n";
  if (export_dir)
    out << "  export        " << (export_dir->empty() ? "none (the job did not finish)" : *export_dir) << "\n";
}

}  // namespace headroom::local
