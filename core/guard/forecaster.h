// Where memory is going: a per-resource forecast from the per-step series.
//
// Input, once per finished step: end-of-step bytes, the step's peak, and the tokens the
// step processed, for host (cgroup working set) and GPU (caching-allocator reserved).
// Model, per resource:
//   end-of-step bytes  b(t) = level + growth * t      (trend; Theil-Sen over a window,
//                                                      so outliers and staircases do not
//                                                      bend it)
//   peak excess        p(t) - b(t) = a + c * tokens(t) (fitted on (tokens, excess), so a
//                                                      long-prompt batch predicts a spike)
// and the predicted peak of step t+h is b(t) + growth*h + a + c*tokens(t+h), with the next
// step's token count known (its batch is formed before it runs) and the recent median
// for later steps.
//
// Classes (what kind of memory behaviour this is; the policy picks actions from it):
//   leak      sustained growth: significant over the window AND still present in the
//             recent half (warm-up growth that levels off is not a leak; a staircase
//             with regular rises is)
//   capacity  no trend; the peak follows tokens (activations) or the level itself sits
//             near the threshold: more memory per step than fits, not a leak
//   plateau   no trend (including warm-up that is levelling off)
//   sawtooth  no trend, with periodic drops (e.g. a cache that is rebuilt)
//   unknown   too few steps to say (fewer than ForecasterOptions::min_history)
//
// A projected crossing is only as good as the growth behind it: the first steps of a
// warm-up and the first tooth of a sawtooth rise like a leak. So each forecast says how
// many steps its growth rests on (trend_steps), and a leak counts as confirmed once that
// reaches ForecasterOptions::confirm_steps; the policy waits for that, or for the limit
// itself, allowing for the margin below, to come within two steps, before it acts on growth.
//
// Staircases (a rollout engine's cache rebuilt every few steps, offloaded state copied in
// at each generation: flat steps, then a jump) are judged over whole periods, not step by
// step: regular jumps every 2 or more steps make a leak "growing J every P steps",
// projected stair by stair, so a flat step after a jump does not hide the next one.
//
// Level shifts: one jump in the window, with no second of comparable size (the first long
// batch, optimizer state allocated at its first step, a cache sized once, offload buffers
// filling) is not growth. It is taken out of the series (every step after it lowered by
// its size) and what is left is judged as above: a plateau after it is judged by its
// level, never by a slope fitted across the jump; a creep after it by that creep. A
// staircase needs a second jump, which shows its period. A level that is itself near the
// threshold is still a crossing (no growth needed for that).
//
// Margin: each Observe() first scores the forecast the guard made for that step (measured
// peak minus forecast), and the forecast carries this run's recent error as a margin
// (forecast_margin_bytes): the policy acts on growth once the limit, allowing for that
// margin, is within two steps.
//
// Contract: Observe() steps must increase (a repeated or older step replaces the history
// from that step on: a restarted worker resumes from a checkpoint). ForecastNext() is
// const, O(window^2), ~ a few microseconds for the default window, allocation-light;
// Observe() makes one forecast (to score it).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace headroom::spec {
struct MemoryGuardSpec;
}

namespace headroom::guard {

// What one step measured (a row of a replay trace). 0 = not measured for peaks/limits.
struct StepMemory {
  int step = 0;
  int64_t host_bytes = 0;        // end of step: cgroup working set
  int64_t host_peak_bytes = 0;   // max during the step (0 = unknown: use host_bytes)
  int64_t gpu_bytes = 0;         // end of step: allocator reserved (0 with no GPU)
  int64_t gpu_peak_bytes = 0;    // reserved peak during the step (0 = unknown)
  int64_t tokens = 0;            // tokens the step processed (prompt + response, all sequences)
  int64_t host_limit_bytes = 0;  // 0 = unknown (keep the last known)
  int64_t gpu_limit_bytes = 0;
};

enum class MemoryClass { kUnknown, kPlateau, kSawtooth, kCapacity, kLeak };
const char* MemoryClassName(MemoryClass c);  // "unknown", "plateau", "sawtooth", "capacity", "leak"

inline constexpr int kNever = -1;  // steps_to_* when the forecast never crosses

struct ResourceForecast {
  bool present = false;              // measured at all (no GPU: false)
  int64_t limit_bytes = 0;           // 0 = no limit known: no steps_to_* (kNever)
  int64_t threshold_bytes = 0;       // threshold fraction * limit
  int64_t current_bytes = 0;         // last end-of-step bytes
  int64_t current_peak_bytes = 0;    // last step's peak
  int64_t level_bytes = 0;           // trend value at the last step (robust "now")
  double growth_bytes_per_step = 0;  // trend slope used for projection (0 unless a trend)
  // Theil-Sen slope over the window before judging it (with fewer than min_history steps:
  // the average rise per step so far; 0 with one step).
  double raw_growth_bytes_per_step = 0;
  // A staircase (regular jumps with flat steps between): a jump of growth_per_period_bytes
  // every period_steps steps, projected stair by stair; growth_bytes_per_step is then the
  // average, jump / period. 0 when the growth is not a staircase.
  int period_steps = 0;
  double growth_per_period_bytes = 0;
  // Lone jumps the window holds, taken out as level shifts (see above): their size in all
  // and the step after the largest (-1: none).
  double level_shift_bytes = 0;
  int level_shift_step = -1;
  double peak_excess_intercept = 0;  // a in peak - end = a + c * tokens
  double peak_bytes_per_token = 0;   // c
  int64_t next_step_tokens = 0;
  // predicted_peak_bytes[h-1] = peak expected in step (last+h), h = 1..horizon.
  std::vector<int64_t> predicted_peak_bytes;
  std::vector<int64_t> predicted_end_bytes;
  int steps_to_threshold = kNever;  // first h >= 1 whose predicted peak >= threshold
  int steps_to_limit = kNever;      // first h >= 1 whose predicted peak >= limit
  // How far above its forecast a peak may come on this run: from the one-step errors of
  // the forecasts for the last window/2 steps (measured minus forecast peak), twice their
  // upper quartile (a forecast running low raises it, one running high does not; never
  // below 0). With fewer than 4 scored forecasts: two deviations of the measurements
  // around the model (once 6 steps back it; 0 before).
  int64_t forecast_margin_bytes = 0;
  // First h whose predicted peak + margin reaches the limit; the margin counts for a leak
  // only (a warm-up levelling off is projected by its damping): otherwise steps_to_limit.
  int steps_to_limit_with_margin = kNever;
  MemoryClass memory_class = MemoryClass::kUnknown;
  bool warming_up = false;  // growth present but decelerating (levels off)
  // Steps the projected growth has been seen over without levelling off or dropping
  // (0: no growth is projected); confirmed once it reaches confirm_steps.
  int trend_steps = 0;
  bool trend_confirmed = false;
  double confidence = 0;  // 0..1: history length and fit quality
  // One line for logs and reasons: "812 MiB of 1 GiB (79%), growing 48 MiB/step (leak)", or
  // for a staircase "40 GiB of 64 GiB (62%), growing 13 GiB every 2 steps (leak)", and
  // after a lone jump "75 GiB of 128 GiB (58%), a level shift of 36 GiB at step 4, not
  // growth (plateau)".
  std::string Describe() const;
  int64_t NextPeak() const { return predicted_peak_bytes.empty() ? 0 : predicted_peak_bytes[0]; }
};

struct Forecast {
  int step = 0;  // the last observed step; forecasts are for step+1..
  int horizon = 0;
  ResourceForecast host;
  ResourceForecast gpu;
};

struct ForecasterOptions {
  int window = 12;      // steps the trend is fitted over
  int min_history = 4;  // fewer steps: class unknown, no trend
  // Steps of sustained, non-decelerating growth that confirm a leak. Longer than a warm-up's
  // steep phase and a cache's tooth in the runs the guard is modelled on (3-5 steps), and
  // at most the window.
  int confirm_steps = 8;
  int horizon = 2;              // steps predicted (predicted_*_bytes size)
  int max_steps_scan = 100000;  // steps_to_* beyond this are kNever
  double host_threshold = 0.90;
  double gpu_threshold = 0.92;
  // Growth below this fraction of the limit per step (or of the level when no limit) is
  // treated as no trend: a 0.1%/step creep is not worth a restart inside the horizon.
  double min_growth_fraction = 0.002;
};

// Options from the spec's memoryGuard (thresholds, horizon).
ForecasterOptions ForecasterOptionsFromSpec(const spec::MemoryGuardSpec& guard);

class Forecaster {
 public:
  explicit Forecaster(ForecasterOptions options = {});

  void Observe(const StepMemory& step);
  // The forecast for the next steps, given the token count of the next step's batch
  // (0 = unknown: the recent median is used).
  Forecast ForecastNext(int64_t next_step_tokens = 0) const;

  void Reset() {
    history_.clear();
    errors_.clear();
  }
  size_t size() const { return history_.size(); }
  const ForecasterOptions& options() const { return options_; }
  const std::deque<StepMemory>& history() const { return history_; }

 private:
  // Measured minus forecast peak of one step, per resource (has_*: a forecast was made).
  struct OneStepError {
    bool has_host = false, has_gpu = false;
    double host = 0, gpu = 0;
  };
  ForecasterOptions options_;
  std::deque<StepMemory> history_;   // at most 4 * window steps are kept
  std::deque<OneStepError> errors_;  // one per history_ entry: the forecast of that step
};

}  // namespace headroom::guard
