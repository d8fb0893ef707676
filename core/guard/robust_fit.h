// Robust statistics the forecaster is built on: median, MAD and the Theil-Sen line.
//
// Theil-Sen (the median of all pairwise slopes) ignores up to ~29% of outliers, so one
// freak step (a checkpoint write, a page-cache burst) does not bend the trend, and a
// staircase (regular rises with flat runs between) gets its average rise per step rather
// than the slope of whichever stair happens to be last.
//
// Contract: inputs of equal length; functions on an empty input return 0. O(n^2) pairs for
// Theil-Sen (n is a window of ~12 steps). Pairs with equal x are skipped.
#pragma once

#include <vector>

namespace headroom::guard {

double Median(std::vector<double> values);
// Median absolute deviation scaled by 1.4826 (a standard deviation for normal noise).
double RobustSigma(const std::vector<double>& values);

struct Line {
  double slope = 0;
  double intercept = 0;  // y at x = 0
  double At(double x) const { return intercept + slope * x; }
};

Line TheilSen(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace headroom::guard
