// guard_bench: the memory guard against the targets that make it worth running (act in
// time on every failure, never on a stable run, forecast closely, cost next to nothing),
// on the hand-made failure-report traces in tests/core/testdata/traces/ and on a generated
// corpus of several hundred traces with ground truth (core/guard/trace_corpus.h).
//
//   1. Lead: per trace, the step of the guard's first decision vs the first step whose
//      peak crosses the limit (a decision at row t is made before step t+1 runs, so any
//      lead >= 1 is in time). Stable traces (steady, warm-ups that level off, sawtooths from
//      their first tooth): false alarms, the traces with any action (target 0).
//   1b. The generated corpus (core/guard/corpus_replay.h): recall on predictable crossings
//      (target 100%), false alarms on stable traces (target 0), the lead distribution
//      (target median >= 2 steps), the forecast error, per family, and the unpredictable
//      crossings apart (left to the exit-137/77 recovery).
//   2. One-step-ahead peak forecast error: |predicted peak(t+1) - measured peak(t+1)| /
//      measured, median over every step of every trace and resource (target <= 3%),
//      against a baseline measured in the same run: naive linear extrapolation of the last
//      two steps (what a predict_linear over a short range does).
//   3. Cost per step of MemoryGuard::AfterStep (observe, forecast, correct the plan,
//      decide) with a full window, in
//      microseconds and as a share of a step (target < 1 ms and < 1%). The tiny job's
//      step time is what the worker logs (step_seconds); pass it with --step-ms (default
//      200 ms, an assumption, printed as such). The cost of one host-probe read is
//      printed alongside, since the worker pays it every step too.
//
// Usage: guard_bench [--traces DIR] [--step-ms MS] [--iterations N] [--seed N]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <string>
#include <vector>

#include "core/guard/corpus_replay.h"
#include "core/guard/memory_guard.h"
#include "core/guard/replay.h"
#include "core/guard/trace.h"
#include "core/memory/host_memory.h"

using namespace headroom;
using guard::StepMemory;

namespace {

int64_t Peak(int64_t end, int64_t peak) { return std::max(end, peak); }

struct Crossing {
  int step = -1;
  std::string resource;
};

Crossing FirstCrossing(const std::vector<StepMemory>& trace) {
  for (const StepMemory& m : trace) {
    if (m.host_limit_bytes > 0 && Peak(m.host_bytes, m.host_peak_bytes) >= m.host_limit_bytes) return {m.step, "host"};
    if (m.gpu_limit_bytes > 0 && Peak(m.gpu_bytes, m.gpu_peak_bytes) >= m.gpu_limit_bytes) return {m.step, "gpu"};
  }
  return {};
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

// Naive baseline: next peak = last peak + (last end - previous end); acts when that, or the
// same extrapolated over the horizon, crosses the threshold.
struct NaiveResult {
  int first_action = -1;
  std::vector<double> errors;
};

NaiveResult Naive(const std::vector<StepMemory>& trace, const spec::MemoryGuardSpec& g) {
  NaiveResult r;
  for (size_t i = 0; i < trace.size(); ++i) {
    for (int gpu = 0; gpu < 2; ++gpu) {
      auto end = [&](size_t k) { return static_cast<double>(gpu ? trace[k].gpu_bytes : trace[k].host_bytes); };
      auto peak = [&](size_t k) {
        return static_cast<double>(gpu ? Peak(trace[k].gpu_bytes, trace[k].gpu_peak_bytes)
                                       : Peak(trace[k].host_bytes, trace[k].host_peak_bytes));
      };
      const double limit = static_cast<double>(gpu ? trace[i].gpu_limit_bytes : trace[i].host_limit_bytes);
      if (peak(i) <= 0) continue;
      const double slope = i > 0 ? end(i) - end(i - 1) : 0;
      if (i + 1 < trace.size()) r.errors.push_back(std::fabs(peak(i) + slope - peak(i + 1)) / peak(i + 1));
      const double threshold = (gpu ? g.gpu_threshold : g.host_threshold) * limit;
      if (r.first_action < 0 && limit > 0 && peak(i) + slope * g.horizon_steps >= threshold) {
        r.first_action = trace[i].step;
      }
    }
  }
  return r;
}

std::vector<std::string> TraceFiles(const std::string& dir) {
  std::vector<std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > 4 && name.substr(name.size() - 4) == ".csv") files.push_back(name);
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

struct HandMadeResult {
  int in_time = 0, must_act = 0, false_actions = 0;
  std::vector<double> errors, naive_errors;
};

// 1. The hand-made failure-report traces, one line each, against the naive baseline.
HandMadeResult HandMadeTraces(const std::string& dir, const std::vector<std::string>& files,
                              const spec::TrainingJobSpec& job) {
  std::printf("== 1. decisions before the limit (default memoryGuard: host 90%%, gpu 92%%, horizon 2)\n");
  std::printf("%-30s %-6s %8s %8s %6s %-17s | %s\n", "trace", "res", "crosses", "acts", "lead", "action",
              "naive baseline acts");
  HandMadeResult out;
  int naive_false = 0, naive_late = 0, stable = 0, false_alarms = 0;
  std::vector<double> leads;
  for (const std::string& name : files) {
    auto trace = guard::ReadTraceFile(dir + "/" + name);
    auto steps = guard::Replay(trace, guard::ReplayOptions{});
    Crossing crossing = FirstCrossing(trace);
    const guard::ReplayStep* first = nullptr;
    int actions = 0;
    for (const auto& s : steps) {
      if (!s.decision.acts()) continue;
      ++actions;
      if (first == nullptr) first = &s;
    }
    for (size_t i = 0; i + 1 < steps.size(); ++i) {
      const StepMemory& next = trace[i + 1];
      if (steps[i].forecast.host.present) {
        double actual = static_cast<double>(Peak(next.host_bytes, next.host_peak_bytes));
        out.errors.push_back(std::fabs(steps[i].forecast.host.NextPeak() - actual) / actual);
      }
      if (steps[i].forecast.gpu.present) {
        double actual = static_cast<double>(Peak(next.gpu_bytes, next.gpu_peak_bytes));
        out.errors.push_back(std::fabs(steps[i].forecast.gpu.NextPeak() - actual) / actual);
      }
    }
    NaiveResult naive = Naive(trace, job.memory_guard);
    out.naive_errors.insert(out.naive_errors.end(), naive.errors.begin(), naive.errors.end());
    std::string label = name.substr(0, name.size() - 4);
    const std::string naive_step = naive.first_action < 0 ? "never" : std::to_string(naive.first_action);
    if (crossing.step >= 0) {
      ++out.must_act;
      bool ok = first != nullptr && first->step < crossing.step && first->decision.resource == crossing.resource;
      out.in_time += ok;
      if (first != nullptr) leads.push_back(crossing.step - first->step);
      if (naive.first_action < 0 || naive.first_action >= crossing.step) ++naive_late;
      std::printf("%-30s %-6s %8d %8s %6s %-17s | %s%s\n", label.c_str(), crossing.resource.c_str(), crossing.step,
                  first ? std::to_string(first->step).c_str() : "never",
                  first ? std::to_string(crossing.step - first->step).c_str() : "-",
                  first ? guard::DecisionActionName(first->decision.action) : "-", naive_step.c_str(),
                  ok ? "" : "   <-- LATE");
    } else {
      out.false_actions += actions;
      ++stable;
      false_alarms += actions > 0;
      if (naive.first_action >= 0) ++naive_false;
      std::printf("%-30s %-6s %8s %8s %6s %-17s | %s\n", label.c_str(), "-", "never",
                  actions ? std::to_string(first->step).c_str() : "never", "-", actions ? "FALSE ACTION" : "none (ok)",
                  naive.first_action < 0 ? "never (ok)" : ("step " + naive_step + " (false alarm)").c_str());
    }
  }
  std::printf("acted in time on the right resource: %d of %d; actions on stable traces: %d (target 0)\n", out.in_time,
              out.must_act, out.false_actions);
  std::printf("false alarms: %d of %d stable traces (target 0); leads before crossing: min %.0f, median %.0f steps\n",
              false_alarms, stable, leads.empty() ? 0.0 : *std::min_element(leads.begin(), leads.end()), Median(leads));
  std::printf("naive baseline: late or never on %d of %d; false alarms on %d stable traces\n\n", naive_late,
              out.must_act, naive_false);
  return out;
}

struct FamilyTally {
  int traces = 0, predictable = 0, in_time = 0, stable = 0, false_alarms = 0, other = 0, other_in_time = 0;
  std::vector<double> leads;
};

void PrintCorpusFamilies(const guard::CorpusScore& score) {
  std::vector<std::pair<std::string, FamilyTally>> families;
  for (const guard::CorpusTraceResult& r : score.traces) {
    auto it = std::find_if(families.begin(), families.end(), [&](const auto& f) { return f.first == r.entry->family; });
    if (it == families.end()) it = families.insert(families.end(), {r.entry->family, FamilyTally{}});
    FamilyTally& f = it->second;
    ++f.traces;
    if (!r.entry->crosses()) {
      ++f.stable;
      f.false_alarms += r.actions > 0;
    } else if (r.entry->predictable) {
      ++f.predictable;
      f.in_time += r.in_time;
      if (r.in_time) f.leads.push_back(r.lead);
    } else {
      ++f.other;
      f.other_in_time += r.in_time;
    }
  }
  std::printf("%-16s %6s %12s %12s %8s %14s %14s\n", "family", "traces", "predictable", "in time", "lead p50",
              "stable/alarms", "other in time");
  for (const auto& [name, f] : families) {
    std::printf("%-16s %6d %12d %12d %8.0f %8d/%-5d %8d/%-5d\n", name.c_str(), f.traces, f.predictable, f.in_time,
                Median(f.leads), f.stable, f.false_alarms, f.other_in_time, f.other);
  }
}

// 1b. The generated corpus; returns whether its targets are met.
bool CorpusTraces(uint64_t seed) {
  const auto corpus = guard::GenerateTraceCorpus(seed);
  const guard::CorpusScore score = guard::ReplayCorpus(corpus);
  std::printf("== 1b. generated corpus (seed %llu): %zu traces\n", static_cast<unsigned long long>(seed),
              corpus.size());
  PrintCorpusFamilies(score);
  int listed = 0;
  for (const guard::CorpusTraceResult& r : score.traces) {
    const bool miss = r.entry->crosses() && (r.entry->predictable || r.entry->known_one_ahead) && !r.in_time;
    const bool alarm = !r.entry->crosses() && r.actions > 0;
    if ((miss || alarm) && listed++ < 12) {
      std::printf("  %s %s: crosses %d, acts %d: %s\n", miss ? "MISSED" : "FALSE ALARM", r.entry->name.c_str(),
                  r.entry->crossing_step, r.first_action_step, r.first_action_reason.c_str());
    }
  }
  std::vector<double> leads = score.leads;
  const double pct = score.predictable ? 100.0 * score.predictable_in_time / score.predictable : 0.0;
  std::printf("recall on predictable crossings: %d of %d (%.1f%%, target 100%%)\n", score.predictable_in_time,
              score.predictable, pct);
  std::printf("known one step ahead (long-prompt batches): %d of %d in time\n", score.known_one_ahead_in_time,
              score.known_one_ahead);
  std::printf("false alarms: %d of %d stable traces (target 0)\n", score.false_alarms, score.stable);
  std::printf("lead on predictable crossings: min %.0f, p10 %.0f, median %.0f, p90 %.0f steps (target median >= 2)\n",
              leads.empty() ? 0.0 : *std::min_element(leads.begin(), leads.end()), Quantile(leads, 0.1), Median(leads),
              Quantile(leads, 0.9));
  std::printf("unpredictable crossings: %d (acted in time anyway: %d; left to the recovery: %d on the host (exit 137), "
              "%d on the GPU (exit 77))\n",
              score.unpredictable, score.unpredictable_in_time, score.left_to_host_recovery,
              score.left_to_gpu_recovery);
  std::printf("one-step peak forecast error, share of the limit: median %.2f%%, p90 %.2f%% (%zu forecasts)\n\n",
              100 * Median(score.forecast_errors), 100 * Quantile(score.forecast_errors, 0.9),
              score.forecast_errors.size());
  return score.predictable_in_time == score.predictable && score.known_one_ahead_in_time == score.known_one_ahead &&
         score.false_alarms == 0 && Median(leads) >= 2;
}

// 3. Cost: a full window of a noisy leak, then Observe + ForecastNext + Decide per step.
bool Cost(const spec::TrainingJobSpec& job, int iterations, double step_ms, bool step_measured) {
  std::printf("== 3. guard cost per step (%d iterations, window %d)\n", iterations, guard::ForecasterOptions{}.window);
  guard::MemoryGuard memory_guard(job, 1);
  uint64_t seed = 1;
  auto noise = [&] {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int64_t>((seed >> 33) % (4 << 20));
  };
  int64_t sink = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) {
    StepMemory m;
    m.step = i;
    m.host_bytes = (1LL << 30) + (i % 50) * (8 << 20) + noise();
    m.host_peak_bytes = m.host_bytes + (32 << 20) + noise();
    m.host_limit_bytes = 4LL << 30;
    m.gpu_bytes = 10LL << 30;
    m.gpu_peak_bytes = (14LL << 30) + noise();
    m.gpu_limit_bytes = 24LL << 30;
    m.tokens = 4000 + (i % 7) * 100;
    guard::Decision d = memory_guard.AfterStep(m, 4200);
    sink += d.forecast_peak_bytes + static_cast<int>(d.action);
  }
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iterations;

  memory::HostMemoryProbe probe;
  const int probe_reads = 2000;
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < probe_reads; ++i) sink += probe.Read().working_set_bytes & 1;
  const double probe_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / probe_reads;
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < probe_reads; ++i) sink += probe.ReadWorkingSet() & 1;
  const double sampler_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / probe_reads;

  std::printf("guard (observe, forecast, plan, decide): %.1f us per step (target < 1000 us)\n", us);
  std::printf("host probe read:   %.1f us (source %s), once per step\n", probe_us, probe.Read().source.c_str());
  std::printf("peak sampler tick: %.1f us (working set only): %.2f%% of one core at a 5 ms period\n", sampler_us,
              100 * sampler_us / 5000);
  std::printf("share of a %.0f ms step (%s): %.4f%% guard, %.4f%% with the probe (target < 1%%)\n", step_ms,
              step_measured ? "measured, from --step-ms" : "ASSUMED default; pass the tiny job's --step-ms",
              100 * us / (step_ms * 1000), 100 * (us + probe_us) / (step_ms * 1000));
  if (sink == 42) std::printf(" \n");
  return us < 1000 && us < 0.01 * step_ms * 1000;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = std::string(HEADROOM_SOURCE_DIR) + "/tests/core/testdata/traces";
  double step_ms = 200;
  bool step_measured = false;
  int iterations = 20000;
  uint64_t seed = guard::kDefaultTraceCorpusSeed;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--traces" && i + 1 < argc) {
      dir = argv[++i];
    } else if (a == "--step-ms" && i + 1 < argc) {
      step_ms = std::atof(argv[++i]);
      step_measured = true;
    } else if (a == "--iterations" && i + 1 < argc) {
      iterations = std::max(100, std::atoi(argv[++i]));
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: guard_bench [--traces DIR] [--step-ms MS] [--iterations N] [--seed N]\n");
      return 2;
    }
  }
  const spec::TrainingJobSpec job;  // default memoryGuard: thresholds 0.90/0.92, horizon 2
  const auto files = TraceFiles(dir);
  if (files.empty()) {
    std::fprintf(stderr, "guard_bench: no *.csv traces in %s\n", dir.c_str());
    return 1;
  }
  const HandMadeResult hand = HandMadeTraces(dir, files, job);
  const bool corpus_ok = CorpusTraces(seed);

  std::printf("== 2. one-step-ahead peak forecast error, hand-made traces (%zu step forecasts)\n", hand.errors.size());
  const double med = Median(hand.errors), naive_med = Median(hand.naive_errors);
  std::printf("guard:  median %.2f%%  p90 %.2f%%   (target median <= 3%%)\n", 100 * med,
              100 * Quantile(hand.errors, 0.9));
  std::printf("naive:  median %.2f%%  p90 %.2f%%   (last two steps, linear)\n", 100 * naive_med,
              100 * Quantile(hand.naive_errors, 0.9));
  std::printf("ratio naive/guard median error: %.2fx\n\n", med > 0 ? naive_med / med : 0.0);

  const bool cost_ok = Cost(job, iterations, step_ms, step_measured);
  const bool ok = hand.in_time == hand.must_act && hand.false_actions == 0 && corpus_ok && med <= 0.03 && cost_ok;
  std::printf("\nverdict: %s\n", ok ? "all targets met" : "TARGETS MISSED");
  return ok ? 0 : 1;
}
