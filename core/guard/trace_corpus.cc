#include "core/guard/trace_corpus.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>

namespace headroom::guard {

namespace {

constexpr int64_t kGiB = 1LL << 30;
constexpr int64_t kHostLimit = 64 * kGiB;
constexpr int64_t kGpuLimit = 80 * kGiB;
constexpr int64_t kBaseTokens = 4096;
constexpr double kNoiseClip = 2.5;  // noise deviations
constexpr int kGuardWindow = 12;    // steps the visibility rule looks back over
constexpr double kVisibleFraction = 0.02;
constexpr double kVisibleSigmas = 3.0;
// Stable shapes keep their noisy peaks below this fraction of the limit (the guard's
// thresholds are 90% and 92%: a peak over the threshold is a crossing the guard exists
// to act on, not a false alarm).
constexpr double kStableCeiling = 0.85;
// Noise levels: the most the noise moves a step, as a fraction of the limit.
const double kNoiseLevels[] = {0.0, 0.01, 0.025, 0.05};

// splitmix64: the same sequence on every platform and standard library.
class CorpusRng {
 public:
  explicit CorpusRng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) / 9007199254740992.0; }  // [0, 1)
  // Box-Muller, clipped: a standard normal in [-kNoiseClip, kNoiseClip].
  double Gaussian() {
    const double u1 = std::max(Uniform(), 1e-12), u2 = Uniform();
    const double g = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    return std::clamp(g, -kNoiseClip, kNoiseClip);
  }

 private:
  uint64_t state_;
};

// A shape in fractions of the limit, noise-free, as a family builds it.
struct Shape {
  std::string family, name;
  bool gpu = false;
  double noise = 0;            // standard deviation, fraction of the limit (a 2.5th of the level)
  std::vector<double> level;   // end of step
  std::vector<double> excess;  // in-step peak above the end
  std::vector<int64_t> tokens;
  std::vector<double> trend;  // the growth that crosses (the level without teeth)
  std::vector<int> rises;     // steps at which that growth showed itself
  double burst = 0;           // a staircase's jump (0: growth comes step by step)
  bool known_one_ahead = false;
  bool stable = false;  // built not to cross: checked, see CheckStable
};

std::string Pct(double fraction) { return std::to_string(static_cast<int>(std::lround(fraction * 1000))); }

std::string NoiseTag(double noise) { return "n" + Pct(noise); }

// Rows go on two steps past the crossing, so a reader sees it; stable shapes run their length.
std::vector<StepMemory> Realise(const Shape& shape, CorpusRng& rng, int* crossing) {
  const int64_t limit = shape.gpu ? kGpuLimit : kHostLimit;
  std::vector<StepMemory> rows;
  *crossing = -1;
  for (size_t t = 0; t < shape.level.size(); ++t) {
    const double end = std::max(0.01, shape.level[t] + shape.noise * rng.Gaussian());
    const double excess = std::max(0.0, shape.excess[t] + 0.1 * shape.noise * rng.Gaussian());
    StepMemory m;
    m.step = static_cast<int>(t);
    m.tokens = shape.tokens[t];
    const int64_t end_bytes = static_cast<int64_t>(end * limit);
    const int64_t peak_bytes = static_cast<int64_t>((end + excess) * limit);
    // The other side sits flat: a host-only job has no GPU; a GPU job's host is steady.
    if (shape.gpu) {
      m.gpu_bytes = end_bytes;
      m.gpu_peak_bytes = peak_bytes;
      m.gpu_limit_bytes = limit;
      m.host_bytes = static_cast<int64_t>(0.3 * kHostLimit);
      m.host_peak_bytes = static_cast<int64_t>(0.32 * kHostLimit);
      m.host_limit_bytes = kHostLimit;
    } else {
      m.host_bytes = end_bytes;
      m.host_peak_bytes = peak_bytes;
      m.host_limit_bytes = limit;
    }
    rows.push_back(m);
    if (*crossing < 0 && peak_bytes >= limit) *crossing = m.step;
    if (*crossing >= 0 && m.step >= *crossing + 2) break;
  }
  return rows;
}

// The first step with two rises behind it whose growth over the guard's window clears
// the noise; -1 when none before `until`.
int VisibleStep(const Shape& shape, int until) {
  const double needed = std::max(kVisibleSigmas * shape.noise, kVisibleFraction);
  // Growth in bursts is seen burst by burst: one no larger than twice the noise level is
  // hidden by it, and so is the burst that crosses.
  if (shape.burst > 0 && shape.burst <= 2 * kNoiseClip * shape.noise) return -1;
  for (int t = 0; t <= until && t < static_cast<int>(shape.trend.size()); ++t) {
    const auto seen = std::count_if(shape.rises.begin(), shape.rises.end(), [&](int r) { return r <= t; });
    const int from = std::max(0, t - (kGuardWindow - 1));
    if (seen >= 2 && shape.trend[t] - shape.trend[from] > needed) return t;
  }
  return -1;
}

// A stable shape must be one a guard can tell from a leak (see the header): wherever two
// rises have been seen, the level plus twice the last rise plus the excess stays below
// the limit, and the noisy peak stays below kStableCeiling + the clipped noise.
void CheckStable(const Shape& shape) {
  for (size_t t = 2; t < shape.level.size(); ++t) {
    const double rise = shape.level[t] - shape.level[t - 1];
    const bool rising = rise > 0 && shape.level[t - 1] > shape.level[t - 2];
    if (rising && shape.level[t] + 2 * rise + shape.excess[t] >= 1.0) {
      throw std::logic_error("trace corpus: stable shape " + shape.name + " rises like a leak at step " +
                             std::to_string(t));
    }
    if (shape.level[t] + shape.excess[t] + kNoiseClip * shape.noise > kStableCeiling + 0.1) {
      throw std::logic_error("trace corpus: stable shape " + shape.name + " peaks too high at step " +
                             std::to_string(t));
    }
  }
}

// A shape of `steps` steps: level(t), with the in-step excess and tokens of an ordinary
// batch; the growth's trend is the level itself and it rises at every step it grows.
Shape Build(const std::string& family, const std::string& name, bool gpu, double noise, int steps,
            const std::function<double(int)>& level, CorpusRng& rng) {
  Shape s;
  s.family = family;
  s.name = name;
  s.gpu = gpu;
  s.noise = noise / kNoiseClip;
  for (int t = 0; t < steps; ++t) {
    s.level.push_back(level(t));
    s.excess.push_back(0.03);
    s.tokens.push_back(kBaseTokens + static_cast<int64_t>((rng.Uniform() - 0.5) * 0.1 * kBaseTokens));
    s.trend.push_back(s.level.back());
    if (t > 0 && s.level[t] > s.level[t - 1] + 1e-9) s.rises.push_back(t);
  }
  return s;
}

const char* Side(bool gpu) { return gpu ? "gpu" : "host"; }

void LinearLeaks(std::vector<Shape>& out, CorpusRng& rng) {
  for (double rate : {0.01, 0.02, 0.04, 0.08})
    for (double start : {0.3, 0.5})
      for (double noise : kNoiseLevels)
        for (bool gpu : {false, true}) {
          std::string name =
              std::string("linear-leak-") + Side(gpu) + "-r" + Pct(rate) + "-s" + Pct(start) + "-" + NoiseTag(noise);
          out.push_back(Build(
              "linear-leak", name, gpu, noise, 120, [=](int t) { return start + rate * t; }, rng));
        }
}

void Staircases(std::vector<Shape>& out, CorpusRng& rng) {
  for (int period = 2; period <= 5; ++period)
    for (double jump : {0.10, 0.20, 0.30})
      for (double noise : kNoiseLevels)
        for (bool gpu : {false, true}) {
          const double start = 0.1 + 0.2 * rng.Uniform();
          const int offset = 1 + static_cast<int>(rng.Next() % period);  // step of the first jump
          std::string name = std::string("staircase-") + Side(gpu) + "-p" + std::to_string(period) + "-j" + Pct(jump) +
                             "-" + NoiseTag(noise);
          Shape s = Build(
              "staircase", name, gpu, noise, 80,
              [=](int t) { return start + jump * (t >= offset ? 1 + (t - offset) / period : 0); }, rng);
          s.burst = jump;
          out.push_back(std::move(s));
        }
}

void Accelerating(std::vector<Shape>& out, CorpusRng& rng) {
  for (double bend : {0.0005, 0.001, 0.002})
    for (double noise : kNoiseLevels)
      for (bool gpu : {false, true}) {
        std::string name = std::string("accelerating-") + Side(gpu) + "-b" +
                           std::to_string(static_cast<int>(bend * 1e4)) + "-" + NoiseTag(noise);
        out.push_back(Build(
            "accelerating", name, gpu, noise, 80, [=](int t) { return 0.35 + 0.005 * t + bend * t * t; }, rng));
      }
}

void SawtoothsWithTrend(std::vector<Shape>& out, CorpusRng& rng) {
  for (int period = 3; period <= 5; ++period)
    for (double drift : {0.01, 0.02})
      for (double noise : {0.0, 0.01, 0.025})
        for (bool gpu : {false, true}) {
          std::string name = std::string("sawtooth-trend-") + Side(gpu) + "-p" + std::to_string(period) + "-d" +
                             Pct(drift) + "-" + NoiseTag(noise);
          Shape s = Build(
              "sawtooth-trend", name, gpu, noise, 120, [=](int t) { return 0.3 + 0.05 * (t % period) + drift * t; },
              rng);
          // The growth that crosses is the drift of the tops, seen once a tooth has ended.
          s.rises.clear();
          for (int t = 0; t < static_cast<int>(s.level.size()); ++t) {
            s.trend[t] = 0.3 + drift * t;
            if (t > 0 && t % period == 0) s.rises.push_back(t);
          }
          out.push_back(std::move(s));
        }
}

void Creep(std::vector<Shape>& out, CorpusRng& rng) {
  for (double rate : {0.003, 0.005, 0.01})
    for (double start : {0.4, 0.6})
      for (double noise : kNoiseLevels) {
        std::string name = "creep-host-r" + Pct(rate) + "-s" + Pct(start) + "-" + NoiseTag(noise);
        out.push_back(Build(
            "creep", name, false, noise, 260, [=](int t) { return start + rate * t; }, rng));
      }
}

// A flat level whose peak is `per_token` (fraction of the limit per kBaseTokens) times the
// batch's tokens; `spike_step` (or none, -1) has `spike` times the usual tokens.
Shape TokenShape(const std::string& family, const std::string& name, bool gpu, double noise, double level,
                 double per_token, double spread, int spike_step, double spike, CorpusRng& rng) {
  Shape s = Build(
      family, name, gpu, noise, 40, [=](int) { return level; }, rng);
  for (size_t t = 0; t < s.level.size(); ++t) {
    double factor = 1.0 + spread * (2 * rng.Uniform() - 1);
    if (static_cast<int>(t) == spike_step) factor = spike;
    s.tokens[t] = static_cast<int64_t>(kBaseTokens * factor);
    s.excess[t] = per_token * factor;
  }
  return s;
}

void LongPrompts(std::vector<Shape>& out, CorpusRng& rng) {
  for (double spike : {5.0, 6.0})
    for (double noise : kNoiseLevels)
      for (bool gpu : {false, true}) {
        const int at = 6 + static_cast<int>(rng.Next() % 15);
        std::string name = std::string("long-prompt-") + Side(gpu) + "-x" + std::to_string(static_cast<int>(spike)) +
                           "-" + NoiseTag(noise);
        Shape s = TokenShape("long-prompt", name, gpu, noise, 0.45, 0.15, 0.05, at, spike, rng);
        s.known_one_ahead = true;
        out.push_back(std::move(s));
      }
}

// Stable shapes. Their tops follow kStableCeiling less the noise level and the excess.
double StableTop(double noise) { return kStableCeiling - noise - 0.03; }

void WarmUps(std::vector<Shape>& out, CorpusRng& rng) {
  for (double plateau : {0.6, 0.7, 0.8})
    for (double decay : {0.5, 0.73, 0.85})
      for (double noise : kNoiseLevels)
        for (bool gpu : {false, true}) {
          const double top = std::min(plateau, StableTop(noise));
          std::string name = std::string("warmup-plateau-") + Side(gpu) + "-p" + Pct(plateau) + "-d" + Pct(decay) +
                             "-" + NoiseTag(noise);
          Shape s = Build(
              "warmup-plateau", name, gpu, noise, 40, [=](int t) { return top - (top - 0.3) * std::pow(decay, t); },
              rng);
          s.stable = true;
          out.push_back(std::move(s));
        }
}

void Sawtooths(std::vector<Shape>& out, CorpusRng& rng) {
  for (int period = 3; period <= 6; ++period)
    for (double rise : {0.04, 0.06})
      for (double noise : kNoiseLevels)
        for (bool gpu : {false, true}) {
          const double top = StableTop(noise);
          std::string name = std::string("sawtooth-") + Side(gpu) + "-p" + std::to_string(period) + "-u" + Pct(rise) +
                             "-" + NoiseTag(noise);
          const int phase = static_cast<int>(rng.Next() % period);
          Shape s = Build(
              "sawtooth", name, gpu, noise, 40, [=](int t) { return top - rise * (period - 1 - (t + phase) % period); },
              rng);
          s.stable = true;
          out.push_back(std::move(s));
        }
}

void Steady(std::vector<Shape>& out, CorpusRng& rng) {
  for (bool high : {false, true})
    for (double noise : kNoiseLevels)
      for (bool gpu : {false, true}) {
        const double level = high ? StableTop(noise) : 0.5;
        std::string name = std::string("steady-") + Side(gpu) + (high ? "-high-" : "-mid-") + NoiseTag(noise);
        Shape s = Build(
            "steady", name, gpu, noise, 40, [=](int) { return level; }, rng);
        s.stable = true;
        out.push_back(std::move(s));
        // The same level under batches of varying size, whose peaks follow them.
        Shape v = TokenShape("token-varying", "token-varying-" + name.substr(7), gpu, noise, level - 0.2, 0.12, 0.4, -1,
                             1.0, rng);
        v.stable = true;
        out.push_back(std::move(v));
      }
}

// One jump, then flat: the first long batch, a cache sized once, offload buffers filling.
// A restart would only see the same jump again at the same step.
void LevelShifts(std::vector<Shape>& out, CorpusRng& rng) {
  for (double jump : {0.20, 0.28, 0.36})
    for (int at : {4, 7})
      for (double noise : kNoiseLevels)
        for (bool gpu : {false, true}) {
          std::string name = std::string("level-shift-") + Side(gpu) + "-j" + Pct(jump) + "-a" + std::to_string(at) +
                             "-" + NoiseTag(noise);
          Shape s = Build(
              "level-shift", name, gpu, noise, 60, [=](int t) { return 0.3 + (t >= at ? jump : 0.0); }, rng);
          s.stable = true;
          out.push_back(std::move(s));
        }
}

// The optimizer's state allocated at its first step: the level after step 1 is the run's.
void FirstStepJumps(std::vector<Shape>& out, CorpusRng& rng) {
  for (double jump : {0.30, 0.40, 0.50})
    for (double noise : kNoiseLevels)
      for (bool gpu : {false, true}) {
        std::string name = std::string("first-step-jump-") + Side(gpu) + "-j" + Pct(jump) + "-" + NoiseTag(noise);
        Shape s = Build(
            "first-step-jump", name, gpu, noise, 40, [=](int t) { return 0.2 + (t >= 1 ? jump : 0.0); }, rng);
        s.stable = true;
        out.push_back(std::move(s));
      }
}

// Two jumps of unequal size (the smaller under a third of the larger), then flat: no
// period, so no staircase, and nothing grows after them. Noise up to 2.5%: at 5% a 6-8%
// jump is inside the noise (up to 2 x 5% between two steps), and two jumps 3 steps apart
// read as growth; nearer in size (under half, not a third) the noise makes them equal
// enough for a staircase.
void TwoJumps(std::vector<Shape>& out, CorpusRng& rng) {
  const std::pair<double, double> sizes[] = {{0.24, 0.06}, {0.06, 0.24}, {0.27, 0.08}};
  for (const auto& [first, second] : sizes)
    for (int gap : {3, 6})
      for (double noise : {0.0, 0.01, 0.025})
        for (bool gpu : {false, true}) {
          std::string name = std::string("two-jumps-") + Side(gpu) + "-j" + Pct(first) + "-" + Pct(second) + "-g" +
                             std::to_string(gap) + "-" + NoiseTag(noise);
          Shape s = Build(
              "two-jumps", name, gpu, noise, 60,
              [=](int t) { return 0.3 + (t >= 3 ? first : 0.0) + (t >= 3 + gap ? second : 0.0); }, rng);
          s.stable = true;
          out.push_back(std::move(s));
        }
}

// A jump, then a slow creep from the new level that crosses many steps later. The growth
// that crosses is the creep: the jump is neither one of its rises nor part of its trend.
void JumpThenCreep(std::vector<Shape>& out, CorpusRng& rng) {
  for (double jump : {0.20, 0.30})
    for (int at : {3, 6})
      for (double rate : {0.005, 0.01})
        for (double noise : kNoiseLevels)
          for (bool gpu : {false, true}) {
            std::string name = std::string("jump-creep-") + Side(gpu) + "-j" + Pct(jump) + "-a" + std::to_string(at) +
                               "-r" + Pct(rate) + "-" + NoiseTag(noise);
            Shape s = Build(
                "jump-creep", name, gpu, noise, 160,
                [=](int t) { return 0.3 + (t >= at ? jump + rate * (t - at) : 0.0); }, rng);
            s.rises.clear();
            for (int t = 0; t < static_cast<int>(s.level.size()); ++t) {
              s.trend[t] = 0.3 + (t >= at ? rate * (t - at) : 0.0);
              if (t > at) s.rises.push_back(t);
            }
            out.push_back(std::move(s));
          }
}

}  // namespace

std::vector<TraceCorpusEntry> GenerateTraceCorpus(uint64_t seed) {
  CorpusRng shape_rng(seed);
  std::vector<Shape> shapes;
  LinearLeaks(shapes, shape_rng);
  Staircases(shapes, shape_rng);
  Accelerating(shapes, shape_rng);
  SawtoothsWithTrend(shapes, shape_rng);
  Creep(shapes, shape_rng);
  LongPrompts(shapes, shape_rng);
  WarmUps(shapes, shape_rng);
  Sawtooths(shapes, shape_rng);
  Steady(shapes, shape_rng);
  // Added after the others, so the families before keep their shapes and noise per seed.
  LevelShifts(shapes, shape_rng);
  FirstStepJumps(shapes, shape_rng);
  TwoJumps(shapes, shape_rng);
  JumpThenCreep(shapes, shape_rng);

  std::vector<TraceCorpusEntry> corpus;
  corpus.reserve(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    if (s.stable) CheckStable(s);
    CorpusRng noise_rng(seed * 1000003ULL + i);
    TraceCorpusEntry e;
    e.name = s.name;
    e.family = s.family;
    e.resource = Side(s.gpu);
    e.steps = Realise(s, noise_rng, &e.crossing_step);
    if (s.stable && e.crosses()) {
      throw std::logic_error("trace corpus: stable shape " + s.name + " crosses at step " +
                             std::to_string(e.crossing_step));
    }
    if (e.crosses()) {
      e.known_one_ahead = s.known_one_ahead && e.crossing_step >= 1;
      e.visible_step = s.known_one_ahead ? e.crossing_step - 1 : VisibleStep(s, e.crossing_step);
      e.predictable = !s.known_one_ahead && e.visible_step >= 0 && e.crossing_step - e.visible_step >= 2;
    }
    corpus.push_back(std::move(e));
  }
  return corpus;
}

}  // namespace headroom::guard
