// How far apart two fp32 computations of the same values may be when they sum in different
// orders: a chunked against an unchunked output head, a micro-batch of 2 rows against one
// of 3, a KV-cached against a full forward. OpenBLAS picks its kernels and blockings per
// matrix shape and per CPU (AVX2, AVX-512; Intel and AMD take different ones), so the last
// bits of such results differ from machine to machine: a test must allow for rounding from
// the quantities compared, never from what one machine happened to give.
//
// The bound (Higham, "Accuracy and Stability of Numerical Algorithms", section 3.1): a sum of
// n products computed in fp32, in any order, is within n * eps * sum(|products|) of the exact
// sum, eps = 2^-23. A value computed through `depth` such sums in a row (the layers of a
// model, then its head) carries at most `depth` of them, each relative to the magnitude the
// values reach, and the two computations compared may err in opposite directions (factor 2).
// Taking `magnitude` as the largest |value| of the whole tensor compared (not each
// element's own) is what covers elements near zero: their error comes from the products
// that summed to them, which are as large as the others'.
//
// The bound is a worst case (rounding errors that all point one way); real differences are
// ~sqrt(n) times smaller. A genuine bug (a wrong target, a chunk boundary off by one, a
// temperature applied twice) moves a log-probability by 1e-2 or more, orders of magnitude
// above it for the small models the tests use.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "worker/model/causal_lm.h"

namespace headroom::testing {

inline constexpr double kFp32Epsilon = std::numeric_limits<float>::epsilon();

// The largest |a - b| to allow between two computations of values up to `magnitude` in
// absolute value, each the result of `depth` chained sums of `terms` products, rounded to
// `epsilon` (fp32 by default; std::numeric_limits<double>::epsilon() for fp64).
inline double SummationTolerance(double magnitude, int64_t terms, int64_t depth = 1, double epsilon = kFp32Epsilon) {
  return 2.0 * static_cast<double>(depth) * static_cast<double>(terms) * epsilon * magnitude;
}

// A model's forward as chained sums: its longest sums run over the widest inner dimension of
// a weight ([out, in] sums over in), or over the positions attention attends to when those
// are more; the logits are the end of layers + 1 of them (each block, then the head).
struct ForwardSums {
  int64_t terms = 0;
  int64_t depth = 0;
};
inline ForwardSums SumsOfForward(worker::CausalLM model, int64_t positions) {
  ForwardSums s{positions, model->layers() + 1};
  for (const auto& [name, p] : model->OrderedParameters()) {
    if (p.dim() == 2) s.terms = std::max(s.terms, p.size(1));
  }
  return s;
}

// max |got - expected| <= tolerance, with both printed when it is not.
inline ::testing::AssertionResult WithinTolerance(const torch::Tensor& got, const torch::Tensor& expected,
                                                  double tolerance) {
  if (got.sizes() != expected.sizes()) return ::testing::AssertionFailure() << "shapes differ";
  const double worst = (got.to(torch::kFloat64) - expected.to(torch::kFloat64)).abs().max().item<double>();
  if (worst <= tolerance) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "largest difference " << worst << " > tolerance " << tolerance;
}

// Two fp32 forwards of `model` over up to `positions` positions in different summation
// orders, `expected` being one of them: within rounding of its largest value.
inline ::testing::AssertionResult WithinForwardRounding(worker::CausalLM model, int64_t positions,
                                                        const torch::Tensor& got, const torch::Tensor& expected) {
  const ForwardSums s = SumsOfForward(model, positions);
  return WithinTolerance(got, expected, SummationTolerance(expected.abs().max().item<double>(), s.terms, s.depth));
}

}  // namespace headroom::testing
