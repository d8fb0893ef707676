// Environment variables between a supervisor and headroom-worker. torchrun's rendezvous
// names (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) are the design's; the HEADROOM_* ones
// are headroom's own (README.md, "Worker environment").
#pragma once

namespace headroom::protocol {

// --- rendezvous (torchrun's names) -------------------------------------------------
inline constexpr const char* kRankEnv = "RANK";
inline constexpr const char* kWorldSizeEnv = "WORLD_SIZE";
inline constexpr const char* kLocalRankEnv = "LOCAL_RANK";  // the device index on this machine
inline constexpr const char* kMasterAddrEnv = "MASTER_ADDR";
inline constexpr const char* kMasterPortEnv = "MASTER_PORT";

// --- set by the supervisor ---------------------------------------------------------
// Where the termination message goes when /dev/termination-log does not exist.
inline constexpr const char* kTerminationLogEnv = "HEADROOM_TERMINATION_LOG";
// What the guard already did to this job (guard::GuardHistory JSON, one line).
inline constexpr const char* kGuardHistoryEnv = "HEADROOM_GUARD_HISTORY";
// The memory limit the worker guards when no cgroup enforces one (`headroom run` without
// cgroups): bytes.
inline constexpr const char* kMemoryLimitEnv = "HEADROOM_MEMORY_LIMIT_BYTES";
// On Kubernetes: the TrainingJob and the generation a pod belongs to.
inline constexpr const char* kJobNameEnv = "HEADROOM_JOB_NAME";
inline constexpr const char* kGenerationEnv = "HEADROOM_GENERATION";

// --- tuning ------------------------------------------------------------------------
inline constexpr const char* kRendezvousTimeoutEnv = "HEADROOM_RENDEZVOUS_TIMEOUT_SECONDS";
inline constexpr const char* kCollectiveTimeoutEnv = "HEADROOM_COLLECTIVE_TIMEOUT_SECONDS";

// --- drills and tests --------------------------------------------------------------
// Makes the worker raise a CUDA out-of-memory error at the start of this (1-based)
// step, on any device, so the GPU-OOM path (exit 77) is testable without a GPU.
inline constexpr const char* kSimulateGpuOomAtStepEnv = "HEADROOM_SIMULATE_GPU_OOM_AT_STEP";
// Makes the worker kill itself (SIGKILL) at a named point of a checkpoint save or of the
// end-of-job export, "POINT" or "POINT@STEP" (the points: core/checkpoint/fault_point.h),
// so a test can crash it exactly between two writes.
inline constexpr const char* kKillAtPointEnv = "HEADROOM_KILL_AT";

}  // namespace headroom::protocol
