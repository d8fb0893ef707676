#include "core/protocol/step_metrics.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "core/metrics/names.h"

namespace headroom::protocol {
namespace {

namespace m = headroom::metrics;

// A row for StepRecord::MEMBER under series NAME (optionally one RESOURCE of a family).
#define HEADROOM_STEP_METRIC(MEMBER, NAME, HELP, RESOURCE, CADENCE)                                                          \
  StepMetric {                                                                                                               \
#MEMBER, NAME, HELP, RESOURCE,                                                                                           \
        [](const StepRecord&                                                                                                 \
               r) { return static_cast<double>(r.MEMBER); },                                                                 \
                                                          [](StepRecord & r,                                                 \
                                                             double                                                          \
                                                                 v) { r.MEMBER = static_cast<decltype(r.MEMBER)>(v); },      \
                                                                                                                     CADENCE \
  }

std::vector<StepMetric> MakeStepMetrics() {
  const char* host = m::kResourceHost;
  const char* gpu = m::kResourceGpu;
  constexpr MetricCadence kEvery = MetricCadence::kEveryStep;
  constexpr MetricCadence kHeldOut = MetricCadence::kHeldOutEvaluation;
  constexpr MetricCadence kStarting = MetricCadence::kStartingEvaluation;
  return {
      HEADROOM_STEP_METRIC(step, m::kWorkerStep, "Last finished training step", nullptr, kEvery),
      HEADROOM_STEP_METRIC(reward_mean, m::kWorkerRewardMean, "Mean reward of the step's samples", nullptr, kEvery),
      HEADROOM_STEP_METRIC(exact_fraction, m::kWorkerExactFraction, "Fraction of the step's samples fully right",
                           nullptr, kEvery),
      HEADROOM_STEP_METRIC(loss, m::kWorkerLoss, "GRPO loss of the step", nullptr, kEvery),
      HEADROOM_STEP_METRIC(kl, m::kWorkerKl, "k3 KL to the reference model (0 without one)", nullptr, kEvery),
      HEADROOM_STEP_METRIC(clip_fraction, m::kWorkerClipFraction, "Fraction of ratios clipped in the step", nullptr,
                           kEvery),
      HEADROOM_STEP_METRIC(grad_norm, m::kWorkerGradNorm, "Gradient norm before clipping", nullptr, kEvery),
      HEADROOM_STEP_METRIC(host_bytes, m::kWorkerHostMemoryBytes, "Host working set at the end of the step", nullptr,
                           kEvery),
      HEADROOM_STEP_METRIC(host_peak_bytes, m::kWorkerHostMemoryPeakBytes, "Host working set peak during the step",
                           nullptr, kEvery),
      HEADROOM_STEP_METRIC(host_limit_bytes, m::kWorkerHostMemoryLimitBytes, "Host memory limit guarded", nullptr,
                           kEvery),
      HEADROOM_STEP_METRIC(gpu_allocated_bytes, m::kWorkerGpuMemoryAllocatedBytes, "CUDA caching allocator: allocated",
                           nullptr, kEvery),
      HEADROOM_STEP_METRIC(gpu_reserved_bytes, m::kWorkerGpuMemoryReservedBytes, "CUDA caching allocator: reserved",
                           nullptr, kEvery),
      HEADROOM_STEP_METRIC(gpu_peak_bytes, m::kWorkerGpuMemoryPeakBytes,
                           "CUDA caching allocator: reserved peak in the step", nullptr, kEvery),
      HEADROOM_STEP_METRIC(gpu_total_bytes, m::kWorkerGpuMemoryTotalBytes, "Device memory (cudaMemGetInfo total)",
                           nullptr, kEvery),
      HEADROOM_STEP_METRIC(gpu_alloc_retries, m::kWorkerGpuAllocRetries,
                           "CUDA caching allocator retries (frees and retries) in the step", nullptr, kEvery),
      HEADROOM_STEP_METRIC(tokens, m::kWorkerStepTokens, "Padded tokens the step processed", nullptr, kEvery),
      HEADROOM_STEP_METRIC(next_step_tokens, m::kWorkerNextStepTokens,
                           "Padded tokens of the next step's largest micro-batch: what the guard forecasts it with",
                           nullptr, kEvery),
      HEADROOM_STEP_METRIC(micro_batch_tokens, m::kWorkerMicroBatchTokens,
                           "Padded tokens of the step's largest micro-batch: what the guard reads as its tokens",
                           nullptr, kEvery),
      HEADROOM_STEP_METRIC(generated_tokens, m::kWorkerGeneratedTokens, "Response tokens sampled in the step", nullptr,
                           kEvery),
      HEADROOM_STEP_METRIC(step_seconds, m::kWorkerStepSeconds, "Wall time of the last step", nullptr, kEvery),
      HEADROOM_STEP_METRIC(tokens_per_second, m::kWorkerTokensPerSecond, "Tokens per second of the last step", nullptr,
                           kEvery),
      HEADROOM_STEP_METRIC(rollout_seconds, m::kWorkerRolloutSeconds, "Rollout time of the last step", nullptr, kEvery),
      HEADROOM_STEP_METRIC(update_seconds, m::kWorkerUpdateSeconds, "Update time of the last step", nullptr, kEvery),
      HEADROOM_STEP_METRIC(world_size, m::kWorkerWorldSize, "Ranks training together", nullptr, kEvery),
      HEADROOM_STEP_METRIC(micro_batch_size, m::kWorkerMicroBatchSize, "Sequences per micro-batch", nullptr, kEvery),
      HEADROOM_STEP_METRIC(host_forecast_steps, m::kWorkerOomForecastSteps,
                           "Forecast steps until the memory limit (-1 = not within reach)", host, kEvery),
      HEADROOM_STEP_METRIC(host_threshold_steps, m::kWorkerOomThresholdSteps,
                           "Forecast steps until the guard's threshold (-1 = not within reach)", host, kEvery),
      HEADROOM_STEP_METRIC(host_growth_bytes_per_step, m::kWorkerMemoryGrowthBytesPerStep,
                           "Forecast memory growth per step", host, kEvery),
      HEADROOM_STEP_METRIC(gpu_forecast_steps, m::kWorkerOomForecastSteps,
                           "Forecast steps until the memory limit (-1 = not within reach)", gpu, kEvery),
      HEADROOM_STEP_METRIC(gpu_threshold_steps, m::kWorkerOomThresholdSteps,
                           "Forecast steps until the guard's threshold (-1 = not within reach)", gpu, kEvery),
      HEADROOM_STEP_METRIC(gpu_growth_bytes_per_step, m::kWorkerMemoryGrowthBytesPerStep,
                           "Forecast memory growth per step", gpu, kEvery),
      HEADROOM_STEP_METRIC(checkpoint_bytes, m::kWorkerCheckpointBytes,
                           "Size of the checkpoint saved after the step (0 = none)", nullptr, kEvery),
      HEADROOM_STEP_METRIC(checkpoint_seconds, m::kWorkerCheckpointSeconds,
                           "Time of the checkpoint saved after the step (0 = none)", nullptr, kEvery),
      HEADROOM_STEP_METRIC(epoch, m::kWorkerDatasetEpoch, "Pass over the dataset the next prompt is in", nullptr,
                           kEvery),
      HEADROOM_STEP_METRIC(cursor, m::kWorkerDatasetCursor, "Position of the next prompt in that pass", nullptr,
                           kEvery),
      HEADROOM_STEP_METRIC(prompts_filtered, m::kWorkerPromptsFiltered,
                           "Dataset records skipped as longer than maxPromptLength", nullptr, kEvery),
      HEADROOM_STEP_METRIC(heldout_reward, m::kWorkerHeldoutReward,
                           "Mean reward of greedy responses to the held-out problems at the latest evaluation "
                           "(-1 before the first)",
                           nullptr, kHeldOut),
      HEADROOM_STEP_METRIC(heldout_problems, m::kWorkerHeldoutProblems,
                           "Held-out problems of the latest evaluation (0 before the first)", nullptr, kHeldOut),
      HEADROOM_STEP_METRIC(heldout_accuracy, m::kWorkerHeldoutAccuracy,
                           "Fraction of held-out problems answered exactly right at the latest evaluation (-1 "
                           "before the first)",
                           nullptr, kHeldOut),
      HEADROOM_STEP_METRIC(heldout_accuracy_before, m::kWorkerHeldoutAccuracyBefore,
                           "Fraction of held-out problems the starting model answered exactly right (-1 = not "
                           "measured)",
                           nullptr, kStarting),
      HEADROOM_STEP_METRIC(heldout_problems_before, m::kWorkerHeldoutProblemsBefore,
                           "Held-out problems the starting model was scored on (0 = not measured)", nullptr, kStarting),
  };
}

#undef HEADROOM_STEP_METRIC

// The series' value as the row reads it: the first sample of that name (and resource),
// when finite.
std::optional<double> Find(const std::vector<metrics::MetricSample>& samples, const char* name, const char* resource) {
  for (const metrics::MetricSample& s : samples) {
    if (s.name != name) continue;
    const auto label = s.labels.find(m::kLabelResource);
    const bool has = label != s.labels.end();
    if (resource == nullptr ? has : (!has || label->second != resource)) continue;
    if (!std::isfinite(s.value)) return std::nullopt;
    return s.value;
  }
  return std::nullopt;
}

const metrics::MetricSample* First(const std::vector<metrics::MetricSample>& samples, const char* name) {
  for (const metrics::MetricSample& s : samples) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

}  // namespace

bool CarriesMetric(const StepMetric& row, const StepRecord& record) {
  switch (row.cadence) {
    case MetricCadence::kEveryStep: return true;
    case MetricCadence::kHeldOutEvaluation: return record.heldout_problems > 0;
    case MetricCadence::kStartingEvaluation: return record.heldout_problems_before > 0;
  }
  return true;
}

const std::vector<StepMetric>& StepMetrics() {
  static const std::vector<StepMetric> rows = MakeStepMetrics();
  return rows;
}

std::optional<StepRecord> StepRecordFromMetrics(const std::vector<metrics::MetricSample>& samples) {
  const std::optional<double> step = Find(samples, m::kWorkerStep, nullptr);
  if (!step || *step < 1) return std::nullopt;
  StepRecord r;
  for (const StepMetric& row : StepMetrics()) {
    if (const std::optional<double> v = Find(samples, row.name, row.resource)) row.set(r, *v);
  }
  if (const metrics::MetricSample* s = First(samples, m::kWorkerStep)) {
    const auto rank = s->labels.find(m::kLabelRank);
    if (rank != s->labels.end()) r.rank = std::atoi(rank->second.c_str());
  }
  if (const metrics::MetricSample* s = First(samples, m::kWorkerGuardAction)) {
    const auto action = s->labels.find(m::kLabelAction);
    if (action != s->labels.end()) r.guard_action = action->second;
  }
  // A worker from before the step_seconds gauge: the duration histogram's mean.
  if (!Find(samples, m::kWorkerStepSeconds, nullptr)) {
    const std::string hist = m::kWorkerStepDurationSeconds;
    const std::optional<double> count = Find(samples, (hist + "_count").c_str(), nullptr);
    const std::optional<double> sum = Find(samples, (hist + "_sum").c_str(), nullptr);
    if (count && sum && *count > 0) r.step_seconds = *sum / *count;
  }
  return r;
}

std::optional<ModelFetchRecord> ModelFetchFromMetrics(const std::vector<metrics::MetricSample>& samples) {
  const metrics::MetricSample* done = First(samples, m::kWorkerModelFetchDoneBytes);
  const metrics::MetricSample* total = First(samples, m::kWorkerModelFetchTotalBytes);
  if (done == nullptr || total == nullptr || !std::isfinite(total->value) || total->value <= 0) return std::nullopt;
  auto label = [&](const char* name) {
    auto it = done->labels.find(name);
    return it == done->labels.end() ? std::string() : it->second;
  };
  ModelFetchRecord r;
  r.repo = label(m::kLabelRepo);
  r.revision = label(m::kLabelRevision);
  r.file = label(m::kLabelFile);
  r.done_bytes = std::isfinite(done->value) ? static_cast<int64_t>(done->value) : 0;
  r.total_bytes = static_cast<int64_t>(total->value);
  return r;
}

}  // namespace headroom::protocol
