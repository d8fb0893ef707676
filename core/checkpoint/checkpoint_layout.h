// The checkpoint directory's names (design.md, "Checkpoints"):
//
//   DIR/step-000120/manifest.json    written last; its presence makes the step complete
//   DIR/step-000120/rank-00000.bin   each rank's raw slices
//   DIR/step-000120.partial/         a step being written (never read; cleaned up)
//   DIR/latest                       "step-000120\n": the newest complete step,
//                                    replaced only by an atomic rename
//
// `latest` is replaced only after the step it names is complete and durable, so a crash
// at any moment leaves it naming a complete step.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace headroom::worker {

inline constexpr const char* kManifestFileName = "manifest.json";
inline constexpr const char* kLatestFileName = "latest";
inline constexpr const char* kPartialSuffix = ".partial";

std::string StepDirName(int64_t step);  // "step-000120"
std::string RankFileName(int rank);     // "rank-00000.bin"
// The step of "step-000120"; nullopt for any other name (including ".partial" dirs).
std::optional<int64_t> ParseStepDirName(const std::string& name);

// Steps under `root` whose manifest exists, ascending.
std::vector<int64_t> CompleteSteps(const std::filesystem::path& root);

// The step directory `latest` names, or nullopt when `root` has no checkpoint.
// Throws CheckpointError when `latest` is malformed. If it names a step that is not
// complete (only possible if someone edited the directory), the newest complete step
// is used instead, with a warning.
std::optional<std::filesystem::path> LatestCheckpoint(const std::filesystem::path& root);

// Points `latest` at `step` atomically and durably.
void WriteLatest(const std::filesystem::path& root, int64_t step);

// Keeps the newest `keep` complete steps (never `latest`'s), removes older ones and any
// stray ".partial" or manifest-less step directory. Returns the names removed.
std::vector<std::string> PruneCheckpoints(const std::filesystem::path& root, int keep);

}  // namespace headroom::worker
