#include "core/guard/forecaster.h"

#include <algorithm>
#include <cmath>

#include "core/base/human_bytes.h"
#include "core/guard/robust_fit.h"
#include "core/spec/training_job.h"

namespace headroom::guard {

namespace {

// Growth must clear the fit's noise by this many sigmas over the window to count.
constexpr double kTrendSigmas = 3.0;
// Recent slope below this fraction of the earlier slope: the growth is levelling off.
constexpr double kDecelerationRatio = 0.5;
// A drop is a fall of at least this fraction of the window's range (and well above the
// step-to-step noise): the sign of a cache flush or a periodic free.
constexpr double kDropFractionOfRange = 0.3;
// Relative token spread above which the peak is fitted as a + c * tokens; below it the
// data cannot separate a from c and the excess is taken as proportional to tokens.
constexpr double kTokenSpreadForFit = 0.15;
// A staircase's jumps: rises above this share of the largest rise in the window, and
// this many jitter sigmas above the steps between them.
constexpr double kStairJumpShare = 0.5;
constexpr double kStairJumpSigmas = 4.0;
// A lone jump (a level shift) stands this many jitter sigmas above the other steps: less
// than a staircase's jumps, since taking one out only stops a slope being fitted across it.
constexpr double kShiftJumpSigmas = 3.0;
// At most this many level shifts are taken out of one window: more jumps than that are
// growth in bursts, judged as such.
constexpr int kMaxLevelShifts = 2;
// The forecast margin: a multiple of the one-step errors' upper quartile (for errors of
// Gaussian noise, 2 x 0.674 = 1.35 deviations: wider margins turned noisy warm-ups into
// crossings in the generated corpus), and how many errors it takes.
constexpr double kMarginPerQuartile = 2.0;
constexpr size_t kMinErrors = 4;
constexpr double kScatterSigmas = 2.0;
constexpr size_t kScatterMinSteps = 6;

struct Series {
  std::vector<double> t, end, peak, tokens;
};

double TokenMedian(const std::vector<double>& tokens) {
  std::vector<double> positive;
  for (double n : tokens) {
    if (n > 0) positive.push_back(n);
  }
  return Median(std::move(positive));
}

// The peak model: peak - end = a + c * tokens.
struct ExcessModel {
  double a = 0;
  double c = 0;
  bool fitted_on_spread = false;  // c estimated from varying token counts
  double At(double tokens) const { return std::max(0.0, a + c * tokens); }
};

ExcessModel FitExcess(const Series& s) {
  ExcessModel m;
  const size_t n = s.t.size();
  std::vector<double> excess(n), tokens;
  bool all_tokens = true;
  for (size_t i = 0; i < n; ++i) {
    excess[i] = std::max(0.0, s.peak[i] - s.end[i]);
    all_tokens &= s.tokens[i] > 0;
  }
  if (!all_tokens) {
    m.a = Median(excess);
    return m;
  }
  double lo = *std::min_element(s.tokens.begin(), s.tokens.end());
  double hi = *std::max_element(s.tokens.begin(), s.tokens.end());
  double med = Median(s.tokens);
  if (n >= 3 && (hi - lo) / med >= kTokenSpreadForFit) {
    Line line = TheilSen(s.tokens, excess);
    m.c = std::max(0.0, line.slope);
    std::vector<double> rest(n);
    for (size_t i = 0; i < n; ++i) rest[i] = excess[i] - m.c * s.tokens[i];
    m.a = Median(std::move(rest));
    m.fitted_on_spread = true;
  } else {
    std::vector<double> per_token(n);
    for (size_t i = 0; i < n; ++i) per_token[i] = excess[i] / s.tokens[i];
    m.c = Median(std::move(per_token));
  }
  return m;
}

// The end-of-step trend and how to project it.
struct Trend {
  double level = 0;      // value at the last step
  double growth = 0;     // bytes per step for the next step
  double damping = 1.0;  // growth of step h is growth * damping^(h-1)
  double raw_slope = 0;
  double rise_cap = -1;    // sawtooth: end never projected above this (+ growth * h); -1 none
  double rise = 0;         // sawtooth: rise per step inside a tooth
  int period = 0;          // staircase: a jump every `period` steps (0: not a staircase)
  double jump = 0;         // staircase: bytes per jump
  int since_jump = 0;      // staircase: steps since the last jump
  double shift = 0;        // lone jumps taken out of the window (level shifts), bytes in all
  double shift_step = -1;  // the step after the largest of them (-1: none)
  MemoryClass klass = MemoryClass::kUnknown;
  bool warming_up = false;
  double quality = 0;  // 0..1: how clearly the data shows what we concluded
  double scatter = 0;  // deviation of the measurements around the model (0: too few)

  double EndAt(int h) const {
    if (period > 0) return level + jump * ((since_jump + h) / period);
    if (rise_cap >= 0) {
      return std::min(level + rise * h, rise_cap + growth * h);
    }
    if (damping >= 1.0) return level + growth * h;
    // growth * (1 + d + ... + d^(h-1))
    return level + growth * (1 - std::pow(damping, h)) / (1 - damping);
  }
  // The highest end-of-step value the projection ever reaches (infinity when unbounded).
  double Ceiling() const {
    if (growth <= 0) return rise_cap >= 0 ? std::max(level, rise_cap) : level;
    if (period > 0 || rise_cap >= 0 || damping >= 1.0) return HUGE_VAL;
    return level + growth / (1 - damping);
  }
};

bool Significant(double slope, double span, double sigma, double min_growth) {
  return slope > min_growth && slope * span > kTrendSigmas * sigma;
}

// Periodic drops: the trend is judged on the tops of the teeth, not on the whole series.
// Fills tr and returns true when the window has a drop (`range`: its spread; `sigma`: the
// residual deviation of its straight-line fit).
bool FitSawtooth(const Series& s, double min_growth, double range, double sigma, Trend& tr) {
  const size_t n = s.t.size();
  std::vector<double> diffs;
  for (size_t i = 1; i < n; ++i) diffs.push_back(s.end[i] - s.end[i - 1]);
  const double diff_sigma = RobustSigma(diffs);
  std::vector<double> top_t, top_v, rises;
  for (size_t i = 1; i < n; ++i) {
    double d = s.end[i] - s.end[i - 1];
    bool drop = d < -std::max(kDropFractionOfRange * range, 4 * diff_sigma) && range > 2 * min_growth;
    if (drop) {
      top_t.push_back(s.t[i - 1]);
      top_v.push_back(s.end[i - 1]);
    } else {
      rises.push_back(d);
    }
  }
  if (top_t.empty()) return false;
  double top_slope = 0;
  if (top_t.size() >= 2) top_slope = TheilSen(top_t, top_v).slope;
  double top_span = top_t.back() - top_t.front();
  double last_top = top_v.back();
  tr.rise = std::max(0.0, Median(rises));
  tr.scatter = RobustSigma(rises) / std::sqrt(2.0);
  // Noise here is the step-to-step jitter of the rises (the drops are excluded).
  if (top_t.size() >= 2 && Significant(top_slope, top_span, RobustSigma(rises), min_growth)) {
    tr.klass = MemoryClass::kLeak;
    tr.growth = top_slope;
    tr.quality = top_slope * top_span / (top_slope * top_span + sigma + 1);
  } else {
    tr.klass = MemoryClass::kSawtooth;
    tr.quality = std::min(1.0, top_t.size() / 2.0);
  }
  tr.rise_cap = std::max(last_top, s.end.back());
  tr.level = s.end.back();
  return true;
}

// Regular bursts: rises standing clear of the step-to-step jitter between them, at least
// two, every `period` >= 2 steps (give or take one), and the last no more than a period
// and a step ago (a staircase that stopped is a plateau). Growth is then judged over whole
// periods: a flat step after a jump says nothing about the next jump. Fills tr and returns
// true when the series is one.
bool FitStaircase(const Series& s, double min_growth, Trend& tr) {
  const size_t n = s.t.size();
  std::vector<double> diffs;
  for (size_t i = 1; i < n; ++i) diffs.push_back(s.end[i] - s.end[i - 1]);
  if (diffs.empty()) return false;
  const double largest = *std::max_element(diffs.begin(), diffs.end());
  std::vector<size_t> jumps;  // index into s of the step after each jump
  std::vector<double> jump_sizes, flat;
  for (size_t i = 0; i < diffs.size(); ++i) {
    if (diffs[i] > kStairJumpShare * largest) {
      jumps.push_back(i + 1);
      jump_sizes.push_back(diffs[i]);
    } else {
      flat.push_back(diffs[i]);
    }
  }
  if (jumps.size() < 2 || flat.size() < jumps.size() - 1) return false;
  // The jitter of the stairs themselves: each point against its stair's median, pooled,
  // as the deviation of a difference of two points.
  std::vector<double> on_stairs;
  for (size_t k = 0; k <= jumps.size(); ++k) {
    const size_t from = k == 0 ? 0 : jumps[k - 1], to = k == jumps.size() ? n : jumps[k];
    if (to - from < 2) continue;
    const double mid = Median(std::vector<double>(s.end.begin() + from, s.end.begin() + to));
    for (size_t i = from; i < to; ++i) on_stairs.push_back(s.end[i] - mid);
  }
  const double jitter = std::max(RobustSigma(flat), std::sqrt(2.0) * RobustSigma(on_stairs)) + std::fabs(Median(flat));
  const double smallest_jump = *std::min_element(jump_sizes.begin(), jump_sizes.end());
  if (smallest_jump <= kStairJumpSigmas * jitter || smallest_jump <= 2 * min_growth) return false;
  std::vector<double> gaps;
  for (size_t k = 1; k < jumps.size(); ++k) gaps.push_back(s.t[jumps[k]] - s.t[jumps[k - 1]]);
  const double period = std::round(Median(gaps));
  for (double g : gaps) {
    if (g < 2 || std::fabs(g - period) > 1) return false;
  }
  const int since = static_cast<int>(s.t.back() - s.t[jumps.back()]);
  if (since > period + 1) return false;
  tr.period = static_cast<int>(period);
  tr.jump = Median(jump_sizes);
  tr.since_jump = since;
  tr.growth = tr.jump / period;
  tr.raw_slope = tr.growth;
  // "Now" is the stair we are on: the steps since the last jump.
  tr.level = Median(std::vector<double>(s.end.begin() + jumps.back(), s.end.end()));
  tr.klass = MemoryClass::kLeak;
  tr.quality = smallest_jump / (smallest_jump + kStairJumpSigmas * jitter + 1);
  tr.scatter = RobustSigma(on_stairs);
  return true;
}

// A lone jump: one rise standing clear of the jitter of the levels on either side of it
// (more than kShiftJumpSigmas of it) and no second rise of comparable size (above
// kStairJumpShare of it, or the jitter bound) in the window. That is a level shift (the
// first long batch, optimizer state allocated at its first step, a cache sized once,
// offload buffers filling), not growth: two such rises are needed before a period, and so
// a staircase, can be told. Returns the index in s of the step after the jump and, in
// `offset`, its size net of the growth around it: the median of the first steps after it
// less the median of the last steps before it, less the average rise between them.
int FindLevelShift(const Series& s, double min_growth, double& offset, double& jitter_out) {
  const size_t n = s.t.size();
  if (n < 3) return -1;
  std::vector<double> diffs;
  for (size_t i = 1; i < n; ++i) diffs.push_back(s.end[i] - s.end[i - 1]);
  const size_t top = static_cast<size_t>(std::max_element(diffs.begin(), diffs.end()) - diffs.begin());
  const double largest = diffs[top];
  std::vector<double> rest;
  for (size_t i = 0; i < diffs.size(); ++i) {
    if (i != top) rest.push_back(diffs[i]);
  }
  const double typical = Median(rest);
  // The jitter from the levels, each against its side's median (as the deviation of a
  // difference of two points): steadier than the differences' own spread on a few steps.
  const size_t after = top + 1;
  std::vector<double> on_sides;
  for (const auto& [from, to] : {std::pair<size_t, size_t>{0, after}, std::pair<size_t, size_t>{after, n}}) {
    if (to - from < 2) continue;
    const double mid = Median(std::vector<double>(s.end.begin() + from, s.end.begin() + to));
    for (size_t i = from; i < to; ++i) on_sides.push_back(s.end[i] - mid);
  }
  const double level_jitter = on_sides.size() >= 3 ? std::sqrt(2.0) * RobustSigma(on_sides) : RobustSigma(rest);
  const double jitter = std::min(level_jitter, RobustSigma(rest)) + std::fabs(typical);
  jitter_out = jitter;
  if (largest <= kShiftJumpSigmas * jitter || largest <= 2 * min_growth) return -1;
  const double bar = std::max(kStairJumpShare * largest, kShiftJumpSigmas * jitter);
  for (double d : rest) {
    if (d > bar) return -1;  // a second jump: a staircase or a leak in bursts, not one shift
  }
  // Up to kShiftSideSteps steps each side, each side's median at its steps' median.
  constexpr size_t kShiftSideSteps = 4;
  const size_t pre_from = after > kShiftSideSteps ? after - kShiftSideSteps : 0;
  const size_t post_to = std::min(n, after + kShiftSideSteps);
  const std::vector<double> pre(s.end.begin() + pre_from, s.end.begin() + after);
  const std::vector<double> post(s.end.begin() + after, s.end.begin() + post_to);
  const std::vector<double> pre_t(s.t.begin() + pre_from, s.t.begin() + after);
  const std::vector<double> post_t(s.t.begin() + after, s.t.begin() + post_to);
  // The growth between the two medians is the window's average rise without the jump (its
  // ends over its span: a median of the rises would follow the sign pattern of the noise).
  const double steps_between = Median(post_t) - Median(pre_t);
  const double drift = (s.end.back() - s.end.front() - largest) / std::max(1.0, static_cast<double>(n - 2));
  offset = Median(post) - Median(pre) - drift * std::max(0.0, steps_between - 1);
  // A rise that the levels around it do not keep (a one-step spike, growth that was going
  // on anyway) is no shift of the level.
  if (offset < kStairJumpShare * largest) return -1;
  return static_cast<int>(after);
}

// `shifts_left`: how many more level shifts may be taken out of this window (each taken
// out is judged again on what is left, so this bounds the recursion).
Trend FitTrend(const Series& s, double min_growth, int min_history, int shifts_left = kMaxLevelShifts) {
  Trend tr;
  const size_t n = s.t.size();
  tr.level = s.end.back();
  if (static_cast<int>(n) < min_history) {
    // Too few steps to judge a trend; keep the plain average rise for the policy to see.
    if (n >= 2) tr.raw_slope = (s.end.back() - s.end.front()) / std::max(1.0, s.t.back() - s.t.front());
    return tr;
  }

  Line line = TheilSen(s.t, s.end);
  tr.raw_slope = line.slope;
  std::vector<double> resid(n);
  for (size_t i = 0; i < n; ++i) resid[i] = s.end[i] - line.At(s.t[i]);
  const double sigma = RobustSigma(resid);
  // A deviation from a handful of residuals is itself noise: the scatter stands in for the
  // forecast error only once half a window backs it.
  tr.scatter = n >= kScatterMinSteps ? sigma : 0.0;
  const double span = s.t.back() - s.t.front();
  const double lo = *std::min_element(s.end.begin(), s.end.end());
  const double hi = *std::max_element(s.end.begin(), s.end.end());
  const double range = hi - lo;

  if (FitSawtooth(s, min_growth, range, sigma, tr)) return tr;
  if (FitStaircase(s, min_growth, tr)) return tr;
  // A lone jump is taken out and what is left judged as usual: a plateau after it by its
  // level (no slope fitted across the jump), growth before and after it by that growth.
  // A warm-up's first step is the largest of rises that keep coming, smaller each time: a
  // series that, judged whole, is no leak (it levels off, or its slope is not significant)
  // and still rises after its largest step by more than the jitter, is one, and stays one.
  double offset = 0, jitter = 0;
  const int after = shifts_left > 0 ? FindLevelShift(s, min_growth, offset, jitter) : -1;
  if (after > 0 && offset > 0) {
    const Trend whole = FitTrend(s, min_growth, min_history, /*shifts_left=*/0);
    const double rise_after = s.end.back() - s.end[static_cast<size_t>(after)];
    if (whole.klass != MemoryClass::kLeak && rise_after > kShiftJumpSigmas * jitter) return whole;
    Series rest = s;
    for (size_t i = static_cast<size_t>(after); i < n; ++i) rest.end[i] -= offset;
    Trend shifted = FitTrend(rest, min_growth, min_history, shifts_left - 1);
    shifted.level += offset;
    if (shifted.rise_cap >= 0) shifted.rise_cap += offset;
    shifted.shift += offset;
    // The step named is the largest jump's: the one taken out first.
    shifted.shift_step = s.t[static_cast<size_t>(after)];
    return shifted;
  }

  // Recent half vs earlier half (overlapping by one point): growth that persists is a
  // leak, growth that fades is warm-up.
  const size_t recent_n = (n + 1) / 2;
  const size_t split = n - recent_n;
  std::vector<double> et(s.t.begin(), s.t.begin() + split + 1), ev(s.end.begin(), s.end.begin() + split + 1);
  std::vector<double> rt(s.t.begin() + split, s.t.end()), rv(s.end.begin() + split, s.end.end());
  const double earlier = TheilSen(et, ev).slope;
  const double recent = TheilSen(rt, rv).slope;

  // Robust "now": the trend line at the last step, shifted by where the last points sit
  // relative to it (on a staircase, which stair we are on).
  std::vector<double> last_resid(resid.end() - std::min<size_t>(3, n), resid.end());
  const double line_level = line.At(s.t.back()) + Median(last_resid);

  if (!Significant(line.slope, span, sigma, min_growth)) {
    std::vector<double> last(s.end.end() - std::min<size_t>(3, n), s.end.end());
    tr.level = Median(last);
    tr.klass = MemoryClass::kPlateau;
    tr.quality = 1.0 - std::min(1.0, sigma / std::max(1.0, std::fabs(tr.level)) * 10);
    return tr;
  }
  tr.level = line_level;
  if (recent < kDecelerationRatio * earlier) {
    // Growth is fading (warm-up: optimizer state, arenas, caches filling). "Now" is the
    // recent half's own line at the last step: the whole-window line lags a curve.
    tr.warming_up = true;
    tr.level = TheilSen(rt, rv).At(s.t.back());
    if (recent <= min_growth) {
      tr.klass = MemoryClass::kPlateau;  // levelled off
      tr.quality = 0.8;
      return tr;
    }
    // Still rising: project a geometric approach to the asymptote, decaying at the rate
    // the slope fell between the two halves.
    const double distance = std::max(1.0, (rt.front() + rt.back()) / 2 - (et.front() + et.back()) / 2);
    tr.damping = std::clamp(std::pow(std::max(0.0, recent / earlier), 1.0 / distance), 0.0, 0.95);
    tr.growth = recent * tr.damping;
    tr.klass = MemoryClass::kPlateau;
    tr.quality = 0.6;
    return tr;
  }
  tr.klass = MemoryClass::kLeak;
  tr.growth = std::max(line.slope, recent);
  tr.quality = tr.growth * span / (tr.growth * span + kTrendSigmas * sigma + 1);
  return tr;
}

// Where the trend and the peak model put each future step's peak.
struct Projection {
  const Trend& trend;
  const ExcessModel& excess;
  double next_tokens = 0;   // step 1's batch
  double token_median = 0;  // later steps'
  int max_steps_scan = 0;

  double PeakAt(int h) const { return trend.EndAt(h) + excess.At(h == 1 ? next_tokens : token_median); }

  // First step whose predicted peak reaches `bound`. Past h = 1 the token count is the
  // median, so the peak grows only with the trend: solve linear growth and staircases
  // directly.
  int StepsTo(double bound) const {
    if (bound <= 0) return kNever;
    if (PeakAt(1) >= bound) return 1;
    if (PeakAt(2) >= bound) return 2;
    if (trend.growth <= 0) return kNever;
    if (trend.period > 0) {
      const double base = trend.level + excess.At(token_median);
      const double jumps = std::ceil((bound - base) / trend.jump);
      const double h = jumps * trend.period - trend.since_jump;
      return h > max_steps_scan ? kNever : static_cast<int>(std::max(3.0, h));
    }
    if (trend.damping >= 1.0 && trend.rise_cap < 0) {
      double base = PeakAt(2) - 2 * trend.growth;
      double h = std::ceil((bound - base) / trend.growth);
      return h > max_steps_scan ? kNever : static_cast<int>(std::max(3.0, h));
    }
    // Bounded growth (damped, or none): never, unless the asymptote itself gets there.
    if (trend.Ceiling() + excess.At(token_median) < bound) return kNever;
    const int scan = std::min(max_steps_scan, 10000);
    for (int h = 3; h <= scan; ++h) {
      if (PeakAt(h) >= bound) return h;
    }
    return kNever;
  }
};

// How far above its forecast a peak may come, from this run's one-step errors (measured
// minus forecast): kMarginPerQuartile times their upper quartile. One-sided on purpose:
// forecasts that ran high (a warm-up levelling off under a straight line) must not widen
// it, and one freak step (a one-time allocation) does not move a quartile. Before
// kMinErrors forecasts have been scored, kScatterSigmas deviations of the measurements
// around the model stand in for them.
double ForecastMargin(std::vector<double> errors, double scatter) {
  if (errors.size() < kMinErrors) return kScatterSigmas * scatter;
  std::sort(errors.begin(), errors.end());
  // Interpolated between ranks: with a handful of errors the nearest rank is the largest.
  const double rank = 0.75 * static_cast<double>(errors.size() - 1);
  const size_t below = static_cast<size_t>(rank);
  const double upper_quartile =
      errors[below] + (rank - below) * (errors[std::min(below + 1, errors.size() - 1)] - errors[below]);
  return std::max(0.0, kMarginPerQuartile * upper_quartile);
}

// One scored forecast: the step it was for and measured minus forecast peak.
struct ScoredError {
  double step = 0;
  double error = 0;
};

ResourceForecast Analyze(const Series& full, const std::vector<ScoredError>& scored, int64_t limit,
                         double threshold_fraction, int64_t next_step_tokens, const ForecasterOptions& o) {
  ResourceForecast f;
  const size_t total = full.t.size();
  if (total == 0) return f;
  for (size_t i = 0; i < total; ++i) f.present |= full.end[i] > 0 || full.peak[i] > 0;
  if (!f.present) return f;

  Series s;
  const size_t begin = total > static_cast<size_t>(o.window) ? total - o.window : 0;
  s.t.assign(full.t.begin() + begin, full.t.end());
  s.end.assign(full.end.begin() + begin, full.end.end());
  s.peak.assign(full.peak.begin() + begin, full.peak.end());
  s.tokens.assign(full.tokens.begin() + begin, full.tokens.end());

  f.limit_bytes = limit;
  f.threshold_bytes = limit > 0 ? static_cast<int64_t>(threshold_fraction * limit) : 0;
  f.current_bytes = static_cast<int64_t>(s.end.back());
  f.current_peak_bytes = static_cast<int64_t>(s.peak.back());

  const double scale = limit > 0 ? limit : std::max(1.0, s.end.back());
  Trend trend = FitTrend(s, o.min_growth_fraction * scale, o.min_history);
  ExcessModel excess = FitExcess(s);
  const double token_median = TokenMedian(s.tokens);
  const Projection projection{trend, excess, next_step_tokens > 0 ? next_step_tokens : token_median, token_median,
                              o.max_steps_scan};

  f.level_bytes = static_cast<int64_t>(trend.level);
  f.growth_bytes_per_step = trend.growth;
  f.raw_growth_bytes_per_step = trend.raw_slope;
  f.period_steps = trend.period;
  f.growth_per_period_bytes = trend.period > 0 ? trend.jump : 0;
  f.level_shift_bytes = trend.shift;
  f.level_shift_step = trend.shift > 0 ? static_cast<int>(trend.shift_step) : -1;
  f.peak_excess_intercept = excess.a;
  f.peak_bytes_per_token = excess.c;
  f.next_step_tokens = static_cast<int64_t>(projection.next_tokens);
  f.warming_up = trend.warming_up;
  if (trend.klass == MemoryClass::kLeak) {
    f.trend_steps = static_cast<int>(s.t.size());
    f.trend_confirmed = f.trend_steps >= o.confirm_steps;
  }
  for (int h = 1; h <= o.horizon; ++h) {
    f.predicted_end_bytes.push_back(static_cast<int64_t>(trend.EndAt(h)));
    f.predicted_peak_bytes.push_back(static_cast<int64_t>(projection.PeakAt(h)));
  }
  // The forecast for the step a level shift landed on missed by the jump: a one-time
  // allocation says nothing about how well this run's growth is forecast.
  std::vector<double> errors;
  for (const ScoredError& e : scored) {
    if (trend.shift <= 0 || e.step != trend.shift_step) errors.push_back(e.error);
  }
  f.forecast_margin_bytes = static_cast<int64_t>(ForecastMargin(errors, trend.scatter));
  if (limit > 0) {
    f.steps_to_threshold = projection.StepsTo(static_cast<double>(f.threshold_bytes));
    f.steps_to_limit = projection.StepsTo(static_cast<double>(limit));
    // The margin widens a trend the forecaster believes in (a leak); a warm-up is projected
    // by its own damping, and a margin on a curve seen flattening would make the last steps
    // of every warm-up near its plateau a crossing.
    const int64_t margin = trend.klass == MemoryClass::kLeak ? f.forecast_margin_bytes : 0;
    f.steps_to_limit_with_margin = projection.StepsTo(static_cast<double>(limit - margin));
  }

  f.memory_class = trend.klass;
  if (f.memory_class == MemoryClass::kPlateau) {
    const bool crossing = f.steps_to_threshold != kNever && f.steps_to_threshold <= o.horizon;
    const bool token_driven = excess.fitted_on_spread && excess.c * token_median >= 0.05 * trend.level;
    if (crossing || token_driven) f.memory_class = MemoryClass::kCapacity;
  }
  const double fill = std::min(1.0, static_cast<double>(s.t.size()) / o.window);
  f.confidence = f.memory_class == MemoryClass::kUnknown ? 0.0 : fill * std::clamp(trend.quality, 0.0, 1.0);
  return f;
}

}  // namespace

const char* MemoryClassName(MemoryClass c) {
  switch (c) {
    case MemoryClass::kUnknown: return "unknown";
    case MemoryClass::kPlateau: return "plateau";
    case MemoryClass::kSawtooth: return "sawtooth";
    case MemoryClass::kCapacity: return "capacity";
    case MemoryClass::kLeak: return "leak";
  }
  return "unknown";
}

std::string ResourceForecast::Describe() const {
  if (!present) return "not measured";
  std::string s = HumanBytes(static_cast<double>(current_bytes));
  if (limit_bytes > 0) {
    s += " of " + HumanBytes(static_cast<double>(limit_bytes)) + " (" +
         Percent(static_cast<double>(current_bytes), static_cast<double>(limit_bytes)) + ")";
  }
  if (level_shift_bytes > 0) {
    s += ", a level shift of " + HumanBytes(level_shift_bytes) + " at step " + std::to_string(level_shift_step) +
         (growth_bytes_per_step > 0 ? " and" : ", not growth");
  }
  if (period_steps > 0) {
    s += std::string(level_shift_bytes > 0 ? " " : ", ") + "growing " + HumanBytes(growth_per_period_bytes) +
         " every " + std::to_string(period_steps) + " steps";
  } else if (growth_bytes_per_step > 0) {
    s += std::string(level_shift_bytes > 0 ? " " : ", ") + (warming_up ? "levelling off, " : "") + "growing " +
         HumanBytes(growth_bytes_per_step) + "/step";
  }
  s += std::string(" (") + MemoryClassName(memory_class) + ")";
  return s;
}

ForecasterOptions ForecasterOptionsFromSpec(const spec::MemoryGuardSpec& guard) {
  ForecasterOptions o;
  o.host_threshold = guard.host_threshold;
  o.gpu_threshold = guard.gpu_threshold;
  o.horizon = std::max(1, guard.horizon_steps);
  return o;
}

Forecaster::Forecaster(ForecasterOptions options) : options_(options) {
  options_.window = std::max(4, options_.window);
  options_.min_history = std::clamp(options_.min_history, 2, options_.window);
  options_.horizon = std::max(1, options_.horizon);
  options_.confirm_steps = std::clamp(options_.confirm_steps, options_.min_history, options_.window);
}

void Forecaster::Observe(const StepMemory& step) {
  // A resumed worker repeats steps after its checkpoint: forget what came after it.
  while (!history_.empty() && history_.back().step >= step.step) {
    history_.pop_back();
    errors_.pop_back();
  }
  // How wrong the forecast for this step was, made as the guard made it: on the steps
  // before, knowing this step's tokens. Only forecasts from a classified history count:
  // the first steps' forecasts project no trend by design.
  OneStepError error;
  if (history_.size() >= static_cast<size_t>(options_.min_history)) {
    const Forecast before = ForecastNext(step.tokens);
    auto measure = [](const ResourceForecast& f, int64_t end, int64_t peak, bool& has, double& value) {
      has = f.present && f.memory_class != MemoryClass::kUnknown && std::max(end, peak) > 0;
      value = has ? static_cast<double>(std::max(end, peak) - f.NextPeak()) : 0.0;
    };
    measure(before.host, step.host_bytes, step.host_peak_bytes, error.has_host, error.host);
    measure(before.gpu, step.gpu_bytes, step.gpu_peak_bytes, error.has_gpu, error.gpu);
  }
  history_.push_back(step);
  errors_.push_back(error);
  while (history_.size() > static_cast<size_t>(4 * options_.window)) {
    history_.pop_front();
    errors_.pop_front();
  }
}

Forecast Forecaster::ForecastNext(int64_t next_step_tokens) const {
  Forecast fc;
  fc.horizon = options_.horizon;
  if (history_.empty()) return fc;
  fc.step = history_.back().step;
  Series host, gpu;
  int64_t host_limit = 0, gpu_limit = 0;
  for (const StepMemory& m : history_) {
    const double t = m.step, tokens = static_cast<double>(m.tokens);
    host.t.push_back(t);
    host.end.push_back(static_cast<double>(m.host_bytes));
    host.peak.push_back(static_cast<double>(std::max(m.host_peak_bytes, m.host_bytes)));
    host.tokens.push_back(tokens);
    gpu.t.push_back(t);
    gpu.end.push_back(static_cast<double>(m.gpu_bytes));
    gpu.peak.push_back(static_cast<double>(std::max(m.gpu_peak_bytes, m.gpu_bytes)));
    gpu.tokens.push_back(tokens);
    if (m.host_limit_bytes > 0) host_limit = m.host_limit_bytes;
    if (m.gpu_limit_bytes > 0) gpu_limit = m.gpu_limit_bytes;
  }
  // The errors of the forecasts for the last half window of steps: recent enough that the
  // misfits of a young history (a warm-up's first steps) age out as it settles.
  std::vector<ScoredError> host_errors, gpu_errors;
  const size_t recent = static_cast<size_t>(std::max(kMinErrors, static_cast<size_t>(options_.window / 2)));
  const size_t from = errors_.size() > recent ? errors_.size() - recent : 0;
  for (size_t i = from; i < errors_.size(); ++i) {
    const double step = history_[i].step;
    if (errors_[i].has_host) host_errors.push_back({step, errors_[i].host});
    if (errors_[i].has_gpu) gpu_errors.push_back({step, errors_[i].gpu});
  }
  fc.host = Analyze(host, host_errors, host_limit, options_.host_threshold, next_step_tokens, options_);
  fc.gpu = Analyze(gpu, gpu_errors, gpu_limit, options_.gpu_threshold, next_step_tokens, options_);
  return fc;
}

}  // namespace headroom::guard
