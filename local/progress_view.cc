#include "local/progress_view.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace headroom::local {

std::string FormatBytes(int64_t b) {
  char buf[32];
  if (b >= (1LL << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1LL << 30));
  else if (b >= (1LL << 20)) std::snprintf(buf, sizeof buf, "%.0f MiB", b / double(1LL << 20));
  else std::snprintf(buf, sizeof buf, "%lld KiB", static_cast<long long>(b >> 10));
  return buf;
}

namespace {

std::string Percent(int64_t bytes, int64_t limit) {
  if (limit <= 0) return "-";
  char buf[16];
  std::snprintf(buf, sizeof buf, "%3.0f%%", 100.0 * bytes / limit);
  return buf;
}

std::string Bar(double fraction, int width) {
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int full = static_cast<int>(fraction * width + 0.5);
  return "[" + std::string(full, '#') + std::string(width - full, '.') + "]";
}

std::string ForecastText(const runtime::MemoryStatus& m) {
  char buf[128];
  if (m.growth_bytes_per_step <= 0 || !m.forecast_steps_to_limit) return "host memory not growing";
  std::snprintf(buf, sizeof buf, "host +%s/step, limit in %.0f step(s)",
                FormatBytes(static_cast<int64_t>(m.growth_bytes_per_step)).c_str(), *m.forecast_steps_to_limit);
  return buf;
}

}  // namespace

std::string HeldOutLines(const protocol::StepRecord& r) {
  if (r.rank != 0) return "";
  std::string out;
  char buf[160];
  if (r.heldout_accuracy_before >= 0) {
    std::snprintf(buf, sizeof buf, "held-out accuracy %.1f%% before the first step (%lld problems)\n",
                  100 * r.heldout_accuracy_before, static_cast<long long>(r.heldout_problems_before));
    out += buf;
  }
  if (r.heldout_accuracy >= 0) {
    std::snprintf(buf, sizeof buf, "step %lld: held-out accuracy %.1f%% (%lld problems)\n",
                  static_cast<long long>(r.step), 100 * r.heldout_accuracy, static_cast<long long>(r.heldout_problems));
    out += buf;
  }
  return out;
}

std::string ModelFetchLine(const protocol::ModelFetchRecord& f) {
  return (f.complete() ? "fetched model " : "fetching model ") + f.repo + "@" + f.revision + ": " +
         FormatBytes(f.done_bytes) + " of " + FormatBytes(f.total_bytes) + (f.complete() ? "" : " (" + f.file + ")");
}

ProgressView::ProgressView(std::ostream& out, bool terminal, std::string job_name)
    : out_(out), terminal_(terminal), job_name_(std::move(job_name)) {}

void ProgressView::Clear() {
  if (terminal_ && drawn_lines_ > 0) {
    out_ << "\x1b[" << drawn_lines_ << "A\x1b[J";
    drawn_lines_ = 0;
  }
}

void ProgressView::Notice(const std::string& message) {
  Clear();
  out_ << "headroom: " << message << "\n";
  out_.flush();
}

std::vector<std::string> ProgressView::Block(const runtime::JobStatus& s) const {
  std::vector<std::string> lines;
  char buf[256];
  const double fraction = s.total_steps > 0 ? static_cast<double>(s.step) / s.total_steps : 0;
  std::snprintf(buf, sizeof buf, "%s  %-10s gen %d, %d worker(s)  step %lld/%lld %s  reward %s", job_name_.c_str(),
                runtime::JobPhaseName(s.phase), s.generation, s.workers, static_cast<long long>(s.step),
                static_cast<long long>(s.total_steps), Bar(fraction, 24).c_str(),
                s.final_reward ? std::to_string(*s.final_reward).substr(0, 5).c_str() : "-");
  if (s.heldout_accuracy) {
    std::snprintf(buf + std::strlen(buf), sizeof buf - std::strlen(buf), "  held-out %.1f%%",
                  100 * *s.heldout_accuracy);
  }
  lines.push_back(buf);
  if (s.model_fetch && latest_.empty()) lines.push_back("  " + ModelFetchLine(*s.model_fetch));
  for (const auto& [rank, r] : latest_) {
    std::snprintf(
        buf, sizeof buf, "  worker %d  host %s of %s %s %s   gpu %s", rank, FormatBytes(r.host_bytes).c_str(),
        r.host_limit_bytes > 0 ? FormatBytes(r.host_limit_bytes).c_str() : "-",
        Percent(r.host_bytes, r.host_limit_bytes).c_str(),
        Bar(r.host_limit_bytes > 0 ? static_cast<double>(r.host_bytes) / r.host_limit_bytes : 0, 20).c_str(),
        r.gpu_total_bytes > 0
            ? (FormatBytes(r.gpu_reserved_bytes) + " " + Percent(r.gpu_reserved_bytes, r.gpu_total_bytes)).c_str()
            : "-");
    lines.push_back(buf);
  }
  std::snprintf(buf, sizeof buf, "  %s   restarts %d  reshards %d  OOM kills %d  steps lost %lld",
                ForecastText(s.memory).c_str(), s.restarts, s.reshards, s.oom_kills,
                static_cast<long long>(s.steps_lost));
  lines.push_back(buf);
  if (s.last_action) {
    std::string a = "  last action: step " + std::to_string(s.last_action->step) + " " +
                    runtime::ToWireName(s.last_action->type) + ": " + s.last_action->reason;
    if (a.size() > 160) a = a.substr(0, 157) + "...";
    lines.push_back(a);
  }
  return lines;
}

void ProgressView::Draw(const runtime::JobStatus& s) {
  Clear();
  const std::vector<std::string> lines = Block(s);
  for (const std::string& l : lines) out_ << l << "\x1b[K\n";
  drawn_lines_ = static_cast<int>(lines.size());
  out_.flush();
  last_draw_ = std::chrono::steady_clock::now();
}

void ProgressView::Update(const runtime::JobStatus& s, const std::vector<protocol::StepRecord>& new_steps) {
  if (s.generation != generation_) {
    latest_.clear();
    generation_ = s.generation;
  }
  bool new_action = s.actions.size() > actions_shown_;
  if (new_action) Clear();
  for (; actions_shown_ < s.actions.size(); ++actions_shown_) {
    const runtime::ActionRecord& a = s.actions[actions_shown_];
    out_ << "[step " << a.step << "] " << runtime::ToWireName(a.type) << ": " << a.reason << "\n";
  }
  if (!terminal_) PrintModelFetch(s);
  for (const protocol::StepRecord& r : new_steps) {
    if (r.generation == generation_) latest_[r.rank] = r;
    // Evaluations are rare and what the run is for: a permanent line each, like actions.
    if (const std::string held = HeldOutLines(r); !held.empty()) {
      Clear();
      new_action = true;  // redraw the block under it
      out_ << held;
    }
    if (!terminal_ && r.rank == 0) {
      char buf[256];
      std::snprintf(
          buf, sizeof buf, "step %lld/%lld  reward %.3f  host %s of %s (%s)  gpu %s  %.2f s/step",
          static_cast<long long>(r.step), static_cast<long long>(s.total_steps), r.reward_mean,
          FormatBytes(r.host_bytes).c_str(), r.host_limit_bytes > 0 ? FormatBytes(r.host_limit_bytes).c_str() : "-",
          Percent(r.host_bytes, r.host_limit_bytes).c_str(),
          r.gpu_total_bytes > 0 ? Percent(r.gpu_reserved_bytes, r.gpu_total_bytes).c_str() : "-", r.step_seconds);
      out_ << buf << "\n";
    }
  }
  if (!terminal_) {
    out_.flush();
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (new_action || !new_steps.empty() || drawn_lines_ == 0 || now - last_draw_ > std::chrono::milliseconds(500)) {
    if (now - last_draw_ >= std::chrono::milliseconds(200) || new_action || drawn_lines_ == 0) Draw(s);
  }
}

void ProgressView::PrintModelFetch(const runtime::JobStatus& s) {
  if (!s.model_fetch) return;
  const protocol::ModelFetchRecord& f = *s.model_fetch;
  const int tenth = f.total_bytes > 0 ? static_cast<int>(10 * f.done_bytes / f.total_bytes) : 0;
  if (f.repo == fetch_repo_shown_ && tenth == fetch_tenth_shown_) return;
  fetch_repo_shown_ = f.repo;
  fetch_tenth_shown_ = tenth;
  out_ << ModelFetchLine(f) << "\n";
}

void ProgressView::Finish(const runtime::JobStatus& s) {
  Update(s, {});
  if (terminal_) Draw(s);
}

}  // namespace headroom::local
