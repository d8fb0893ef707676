// Prometheus metric names (docs/design.md, Metrics). Base units; labels `job` and `rank` on
// worker series (Kubernetes adds `pod` and `namespace` at scrape). Dashboards, alert
// rules and tests refer to these exact strings: rename nothing.
#pragma once

namespace headroom::metrics {

// --- worker -------------------------------------------------------------------------
inline constexpr const char* kWorkerStep = "headroom_worker_step";
inline constexpr const char* kWorkerHostMemoryBytes = "headroom_worker_host_memory_bytes";
inline constexpr const char* kWorkerHostMemoryPeakBytes = "headroom_worker_host_memory_peak_bytes";
inline constexpr const char* kWorkerHostMemoryLimitBytes = "headroom_worker_host_memory_limit_bytes";
inline constexpr const char* kWorkerGpuMemoryAllocatedBytes = "headroom_worker_gpu_memory_allocated_bytes";
inline constexpr const char* kWorkerGpuMemoryReservedBytes = "headroom_worker_gpu_memory_reserved_bytes";
inline constexpr const char* kWorkerGpuMemoryPeakBytes = "headroom_worker_gpu_memory_peak_bytes";
inline constexpr const char* kWorkerGpuMemoryTotalBytes = "headroom_worker_gpu_memory_total_bytes";
// Labelled {resource="host"|"gpu"}.
inline constexpr const char* kWorkerMemoryGrowthBytesPerStep = "headroom_worker_memory_growth_bytes_per_step";
inline constexpr const char* kWorkerOomForecastSteps = "headroom_worker_oom_forecast_steps";
inline constexpr const char* kWorkerRewardMean = "headroom_worker_reward_mean";
inline constexpr const char* kWorkerLoss = "headroom_worker_loss";
inline constexpr const char* kWorkerKl = "headroom_worker_kl";
inline constexpr const char* kWorkerTokensTotal = "headroom_worker_tokens_total";
inline constexpr const char* kWorkerStepDurationSeconds = "headroom_worker_step_duration_seconds";  // histogram
// Beyond docs/design.md's list (added, not renamed): text tasks' held-out evaluation.
inline constexpr const char* kWorkerHeldoutReward = "headroom_worker_heldout_reward";
// The fraction of held-out problems answered exactly right at the latest evaluation (the
// one before the first step included); -1 before any.
inline constexpr const char* kWorkerHeldoutAccuracy = "headroom_worker_heldout_accuracy";
// Beyond docs/design.md's list (added, not renamed): a spec.model.hub model's download
// before the first step (core/protocol/model_fetch_record.h), labelled {repo, revision, file}
// besides {job, rank}; served only while the worker fetches.
inline constexpr const char* kWorkerModelFetchDoneBytes = "headroom_worker_model_fetch_done_bytes";
inline constexpr const char* kWorkerModelFetchTotalBytes = "headroom_worker_model_fetch_total_bytes";

// Beyond docs/design.md's list (added, not renamed): the rest of the step record, one
// series per field (core/protocol/step_metrics.h), so the operator reads back every
// field the worker logs.
inline constexpr char kWorkerExactFraction[] = "headroom_worker_exact_fraction";
inline constexpr char kWorkerClipFraction[] = "headroom_worker_clip_fraction";
inline constexpr char kWorkerGradNorm[] = "headroom_worker_grad_norm";
inline constexpr char kWorkerGpuAllocRetries[] = "headroom_worker_gpu_alloc_retries";
inline constexpr char kWorkerStepTokens[] = "headroom_worker_step_tokens";
inline constexpr char kWorkerNextStepTokens[] = "headroom_worker_next_step_tokens";
inline constexpr char kWorkerMicroBatchTokens[] = "headroom_worker_micro_batch_tokens";
inline constexpr char kWorkerGeneratedTokens[] = "headroom_worker_generated_tokens";
inline constexpr char kWorkerStepSeconds[] = "headroom_worker_step_seconds";
inline constexpr char kWorkerTokensPerSecond[] = "headroom_worker_tokens_per_second";
inline constexpr char kWorkerRolloutSeconds[] = "headroom_worker_rollout_seconds";
inline constexpr char kWorkerUpdateSeconds[] = "headroom_worker_update_seconds";
inline constexpr char kWorkerWorldSize[] = "headroom_worker_world_size";
inline constexpr char kWorkerMicroBatchSize[] = "headroom_worker_micro_batch_size";
inline constexpr char kWorkerGuardAction[] = "headroom_worker_guard_action";               // 1, labelled {action}
inline constexpr char kWorkerOomThresholdSteps[] = "headroom_worker_oom_threshold_steps";  // {resource}
inline constexpr char kWorkerCheckpointBytes[] = "headroom_worker_checkpoint_bytes";
inline constexpr char kWorkerCheckpointSeconds[] = "headroom_worker_checkpoint_seconds";
inline constexpr char kWorkerDatasetEpoch[] = "headroom_worker_dataset_epoch";
inline constexpr char kWorkerDatasetCursor[] = "headroom_worker_dataset_cursor";
inline constexpr char kWorkerPromptsFiltered[] = "headroom_worker_prompts_filtered";
inline constexpr char kWorkerHeldoutProblems[] = "headroom_worker_heldout_problems";
// The starting model's held-out evaluation, measured before the job's first step.
inline constexpr char kWorkerHeldoutAccuracyBefore[] = "headroom_worker_heldout_accuracy_before";
inline constexpr char kWorkerHeldoutProblemsBefore[] = "headroom_worker_heldout_problems_before";

// --- operator -----------------------------------------------------------------------
inline constexpr const char* kOperatorReconcileTotal = "headroom_operator_reconcile_total";  // {result}
inline constexpr const char* kOperatorReconcileDurationSeconds = "headroom_operator_reconcile_duration_seconds";
inline constexpr const char* kOperatorGuardActionsTotal = "headroom_operator_guard_actions_total";  // {action,reason}
inline constexpr const char* kOperatorJobs = "headroom_operator_jobs";                              // {phase}
// Beyond docs/design.md's list (added, not renamed): the work queue as client-go exports it.
inline constexpr const char* kOperatorWorkqueueDepth = "headroom_operator_workqueue_depth";            // {name}
inline constexpr const char* kOperatorWorkqueueWaiting = "headroom_operator_workqueue_waiting";        // {name}
inline constexpr const char* kOperatorWorkqueueProcessing = "headroom_operator_workqueue_processing";  // {name}

// --- labels -------------------------------------------------------------------------
inline constexpr const char* kLabelJob = "job";
inline constexpr const char* kLabelRank = "rank";
inline constexpr const char* kLabelResource = "resource";
inline constexpr const char* kLabelRepo = "repo";
inline constexpr const char* kLabelRevision = "revision";
inline constexpr const char* kLabelFile = "file";
inline constexpr const char* kLabelAction = "action";
inline constexpr const char* kResourceHost = "host";
inline constexpr const char* kResourceGpu = "gpu";

}  // namespace headroom::metrics
