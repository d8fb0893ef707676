#include "operator/trainingjob/worker_metrics_text.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/metrics/names.h"

namespace headroom::trainingjob {

namespace {

bool ParseValue(const std::string& text, double* out) {
  if (text == "NaN") { *out = std::nan(""); return true; }
  if (text == "+Inf" || text == "Inf") { *out = INFINITY; return true; }
  if (text == "-Inf") { *out = -INFINITY; return true; }
  char* end = nullptr;
  *out = std::strtod(text.c_str(), &end);
  return end != text.c_str() && *end == '\0';
}

// Parses `{a="x",b="y"}` starting at line[*pos] == '{'; leaves *pos after the '}'.
bool ParseLabels(const std::string& line, size_t* pos, std::map<std::string, std::string>* labels) {
  size_t i = *pos + 1;
  for (;;) {
    while (i < line.size() && (line[i] == ' ' || line[i] == ',')) ++i;
    if (i >= line.size()) return false;
    if (line[i] == '}') { *pos = i + 1; return true; }
    size_t eq = line.find('=', i);
    if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') return false;
    std::string key = line.substr(i, eq - i);
    std::string value;
    size_t j = eq + 2;
    for (; j < line.size() && line[j] != '"'; ++j) {
      if (line[j] == '\\' && j + 1 < line.size()) {
        ++j;
        value += line[j] == 'n' ? '\n' : line[j];
      } else {
        value += line[j];
      }
    }
    if (j >= line.size()) return false;
    (*labels)[key] = value;
    i = j + 1;
  }
}

}  // namespace

std::vector<MetricSample> ParsePrometheusText(const std::string& text) {
  std::vector<MetricSample> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    MetricSample s;
    size_t i = start;
    while (i < line.size() && line[i] != '{' && line[i] != ' ' && line[i] != '\t') ++i;
    s.name = line.substr(start, i - start);
    if (i < line.size() && line[i] == '{' && !ParseLabels(line, &i, &s.labels)) continue;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t end = line.find_first_of(" \t", i);
    std::string value = line.substr(i, end == std::string::npos ? std::string::npos : end - i);
    if (s.name.empty() || !ParseValue(value, &s.value)) continue;
    out.push_back(std::move(s));
  }
  return out;
}

std::optional<protocol::StepRecord> WorkerStepFromMetrics(const std::vector<MetricSample>& samples) {
  std::map<std::string, double> plain;  // unlabelled-by-resource series, first sample each
  std::map<std::string, double> host;   // {resource="host"} series
  for (const MetricSample& s : samples) {
    if (s.name.rfind("headroom_worker_", 0) != 0) continue;
    auto resource = s.labels.find(metrics::kLabelResource);
    if (resource == s.labels.end()) {
      plain.emplace(s.name, s.value);
    } else if (resource->second == metrics::kResourceHost) {
      host.emplace(s.name, s.value);
    }
  }
  auto get = [&](const char* name) -> double {
    auto it = plain.find(name);
    return it == plain.end() || std::isnan(it->second) || std::isinf(it->second) ? 0.0 : it->second;
  };
  auto bytes = [&](const char* name) { return static_cast<int64_t>(get(name)); };
  auto host_value = [&](const char* name, double fallback) {
    auto it = host.find(name);
    return it == host.end() || std::isnan(it->second) || std::isinf(it->second) ? fallback : it->second;
  };
  const int64_t step = bytes(metrics::kWorkerStep);
  if (step <= 0) return std::nullopt;
  protocol::StepRecord r;
  r.step = step;
  r.reward_mean = get(metrics::kWorkerRewardMean);
  r.loss = get(metrics::kWorkerLoss);
  r.kl = get(metrics::kWorkerKl);
  // The latest evaluation's, on every scrape (a gauge keeps it): what the status shows.
  if (auto it = plain.find(metrics::kWorkerHeldoutAccuracy); it != plain.end() && std::isfinite(it->second)) {
    r.heldout_accuracy = it->second;
  }
  r.host_bytes = bytes(metrics::kWorkerHostMemoryBytes);
  r.host_peak_bytes = bytes(metrics::kWorkerHostMemoryPeakBytes);
  r.host_limit_bytes = bytes(metrics::kWorkerHostMemoryLimitBytes);
  r.gpu_allocated_bytes = bytes(metrics::kWorkerGpuMemoryAllocatedBytes);
  r.gpu_reserved_bytes = bytes(metrics::kWorkerGpuMemoryReservedBytes);
  r.gpu_peak_bytes = bytes(metrics::kWorkerGpuMemoryPeakBytes);
  r.gpu_total_bytes = bytes(metrics::kWorkerGpuMemoryTotalBytes);
  // The worker's own forecast (its guard's); no threshold forecast is exported.
  r.host_growth_bytes_per_step = host_value(metrics::kWorkerMemoryGrowthBytesPerStep, 0);
  r.host_forecast_steps = static_cast<int>(host_value(metrics::kWorkerOomForecastSteps, -1));
  // The step's duration is a histogram: its _sum over _count is the mean, and the newest
  // step is what a scrape can say; tokens are a running total (the per-step count is not
  // exported), so tokens_per_second is left to the worker's own log.
  const std::string hist = metrics::kWorkerStepDurationSeconds;
  const double count = get((hist + "_count").c_str());
  if (count > 0) r.step_seconds = get((hist + "_sum").c_str()) / count;
  return r;
}

std::optional<protocol::ModelFetchRecord> WorkerModelFetchFromMetrics(const std::vector<MetricSample>& samples) {
  const MetricSample* done = nullptr;
  const MetricSample* total = nullptr;
  for (const MetricSample& s : samples) {
    if (s.name == metrics::kWorkerModelFetchDoneBytes && done == nullptr) done = &s;
    if (s.name == metrics::kWorkerModelFetchTotalBytes && total == nullptr) total = &s;
  }
  if (done == nullptr || total == nullptr || !std::isfinite(total->value) || total->value <= 0) return std::nullopt;
  auto label = [&](const char* name) {
    auto it = done->labels.find(name);
    return it == done->labels.end() ? std::string() : it->second;
  };
  protocol::ModelFetchRecord r;
  r.repo = label(metrics::kLabelRepo);
  r.revision = label(metrics::kLabelRevision);
  r.file = label(metrics::kLabelFile);
  r.done_bytes = std::isfinite(done->value) ? static_cast<int64_t>(done->value) : 0;
  r.total_bytes = static_cast<int64_t>(total->value);
  return r;
}

}  // namespace headroom::trainingjob
