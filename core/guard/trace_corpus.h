// A generated corpus of memory traces with ground truth: the shapes memory takes in the
// failure reports (see README, "The guard does not cry wolf"), in many sizes, with noise,
// on host and GPU, each labelled with whether and when it crosses its limit and whether
// that crossing can be foreseen. guard_bench replays it and core_trace_corpus_test holds
// the guard to it.
//
// Families (TraceCorpusEntry::family):
//   linear-leak      constant growth, 1-8% of the limit per step
//   staircase        flat for period-1 steps, then a jump of 10-30% of the limit; periods 2-5
//   accelerating     growth that itself grows (quadratic)
//   sawtooth-trend   teeth whose tops rise from tooth to tooth
//   creep            slow node-level growth, 0.3-1% of the limit per step, host
//   long-prompt      a flat level whose in-step peak follows the batch's tokens; one batch
//                    of long prompts crosses (known one step ahead: its tokens)
//   warmup-plateau   fast growth levelling off below the threshold          (stable)
//   sawtooth         teeth with flat tops                                     (stable)
//   steady           a flat level                                             (stable)
//   token-varying    a flat level with peaks following varying batches        (stable)
//   level-shift      one jump of 20-36% of the limit at step 4 or 7, then flat (stable)
//   first-step-jump  one jump of 30-50% at step 1 (optimizer state), then flat (stable)
//   two-jumps        two jumps of unequal size (the smaller under a third of the
//                    larger, 3 or 6 steps apart), then flat; noise up to 2.5% (stable)
//   jump-creep       a jump of 20-30%, then a creep of 0.5-1% per step from the new
//                    level, crossing tens of steps later (the growth that crosses, for
//                    visible_step, is the creep alone)
// Noise: up to 0, 1, 2.5 or 5% of the limit per step: Gaussian with a deviation of a
// 2.5th of that level, clipped at the level, on the end-of-step bytes (and a tenth of it
// on the in-step excess).
//
// Ground truth, from the noise-free series the generator built:
//   crossing_step    the first step whose measured peak reaches the limit (-1: stable)
//   visible_step     the first step at which the growth that crosses has shown itself:
//                    at least two separate rises (two jumps of a staircase, two finished
//                    teeth of a sawtooth, two steps of a leak) adding up, over the last 12
//                    steps (the guard's window), to more than 3 noise deviations and 2% of
//                    the limit; for a staircase, only when each jump is more than twice
//                    the noise level (a smaller one is hidden by the noise, and so is the
//                    jump that crosses). -1 when it never does before the crossing.
//   predictable      the crossing is at least 2 steps after visible_step: a guard that
//                    reads the growth has a decision to spare
//   known_one_ahead  a long-prompt crossing: nothing grows, but the batch that crosses is
//                    formed before it runs (next_step_tokens), so a decision one step
//                    ahead is possible
// A stable shape never rises, before its first fall, to within two of its steepest rises
// (plus its in-step excess) of the limit: a leak with that rise must be acted on there,
// so a shape that does cannot be told from one and is not "stable".
//
// Contract: GenerateTraceCorpus(seed) is deterministic (its own generator and Gaussian, no
// std:: distributions, whose output differs between standard libraries) and returns at
// least 300 entries whose names are unique.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/guard/forecaster.h"

namespace headroom::guard {

struct TraceCorpusEntry {
  std::string name;  // "staircase-host-p3-j20-n1-s1": family, resource, parameters
  std::string family;
  std::string resource;  // "host" | "gpu": the side the shape is on
  std::vector<StepMemory> steps;
  int crossing_step = -1;
  int visible_step = -1;
  bool predictable = false;
  bool known_one_ahead = false;
  bool crosses() const { return crossing_step >= 0; }
};

inline constexpr uint64_t kDefaultTraceCorpusSeed = 28;

std::vector<TraceCorpusEntry> GenerateTraceCorpus(uint64_t seed = kDefaultTraceCorpusSeed);

}  // namespace headroom::guard
