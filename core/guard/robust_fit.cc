#include "core/guard/robust_fit.h"

#include <algorithm>
#include <cmath>

namespace headroom::guard {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  double lower = *std::max_element(values.begin(), values.begin() + mid);
  return (lower + upper) / 2;
}

double RobustSigma(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double m = Median(values);
  std::vector<double> dev;
  dev.reserve(values.size());
  for (double v : values) dev.push_back(std::fabs(v - m));
  return 1.4826 * Median(std::move(dev));
}

Line TheilSen(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = std::min(x.size(), y.size());
  Line line;
  if (n == 0) return line;
  std::vector<double> slopes;
  slopes.reserve(n * (n - 1) / 2);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      if (x[j] != x[i]) slopes.push_back((y[j] - y[i]) / (x[j] - x[i]));
    }
  }
  line.slope = slopes.empty() ? 0 : Median(std::move(slopes));
  std::vector<double> intercepts;
  intercepts.reserve(n);
  for (size_t i = 0; i < n; ++i) intercepts.push_back(y[i] - line.slope * x[i]);
  line.intercept = Median(std::move(intercepts));
  return line;
}

}  // namespace headroom::guard
