// The checkpoint directory's names (docs/design.md, "Checkpoints"): the one place the writer,
// the reader, resharding and the exporter take them from.
//
//   DIR/step-000120/manifest.json    written last; its presence makes the step complete
//   DIR/step-000120/rank-00000.bin   each rank's raw slices
//   DIR/step-000120.partial/         a step being written (never read; cleaned up)
//   DIR/step-000120.corrupt/         a step that failed its checksums, set aside on resume
//                                    (kept for inspection, never read or pruned)
//   DIR/latest                       "step-000120\n": the newest complete step,
//                                    replaced only by an atomic rename
//
// `latest` is replaced only after the step it names is complete, durable and verified, so
// a crash at any moment leaves it naming a complete step.
//
// Tensor names inside a step: the model's parameters under "model.<parameter name>" (the
// Hugging Face names for those models), AdamW's moments under "optim.exp_avg.<name>" and
// "optim.exp_avg_sq.<name>", and the optimizer's step count "optim.step".
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace headroom::checkpoint {

inline constexpr const char* kManifestFileName = "manifest.json";
inline constexpr const char* kLatestFileName = "latest";
inline constexpr const char* kPartialSuffix = ".partial";
inline constexpr const char* kCorruptSuffix = ".corrupt";

inline constexpr const char* kModelTensorPrefix = "model.";
inline constexpr const char* kExpAvgTensorPrefix = "optim.exp_avg.";
inline constexpr const char* kExpAvgSqTensorPrefix = "optim.exp_avg_sq.";
inline constexpr const char* kOptimizerStepTensor = "optim.step";

std::string StepDirName(int64_t step);  // "step-000120"
std::string RankFileName(int rank);     // "rank-00000.bin"
// The step of "step-000120"; nullopt for any other name (including ".partial" dirs).
std::optional<int64_t> ParseStepDirName(const std::string& name);

// Steps under `root` whose manifest exists, ascending.
std::vector<int64_t> CompleteSteps(const std::filesystem::path& root);

// The step to resume from as the directory says it: the one reader of `latest` (the
// worker, `headroom run`'s backend and its notices, the export all ask here).
struct LatestStep {
  std::filesystem::path dir;  // root/step-N
  int64_t step = 0;
  // "" when `latest` names this complete step; else why the newest complete step was taken
  // instead: `latest` is missing (deleted by hand, or lost with its directory entry), is
  // malformed, or names a step that is not complete. A missing `latest` never means "no
  // checkpoint" while a complete step exists: starting over would overwrite training.
  std::string fallback;
};

// nullopt only when `root` holds no complete step (and `latest` names none). Never throws
// for what `latest` holds; reads only names and manifests' presence, never contents.
std::optional<LatestStep> FindLatestStep(const std::filesystem::path& root);
// FindLatestStep's step, for a supervisor's count of steps lost.
std::optional<int64_t> LatestCheckpointStep(const std::filesystem::path& root);

// FindLatestStep's directory, a fallback warned about on stderr. Throws CheckpointError
// when `latest` is malformed, or when it names a step that is not complete and no other
// complete step exists.
std::optional<std::filesystem::path> LatestCheckpoint(const std::filesystem::path& root);

// `checkpoint` itself when it holds a manifest (one step), else the step its `latest`
// names (a checkpoint root). Throws CheckpointError when it is neither.
std::filesystem::path StepDirOf(const std::filesystem::path& checkpoint);

// Points `latest` at `step` atomically and durably.
void WriteLatest(const std::filesystem::path& root, int64_t step);

// Keeps the newest `keep` complete steps (never `latest`'s), removes older ones and any
// stray ".partial" or manifest-less step directory. Returns the names removed. Callers
// prune only after the newest step has been verified (the writer reads it back), so an
// older step is never removed while it is the only intact copy of its training.
std::vector<std::string> PruneCheckpoints(const std::filesystem::path& root, int keep);

// Renames DIR/step-N to DIR/step-N.corrupt (replacing an older such copy) and fsyncs DIR:
// a step that failed its checks leaves the set of complete steps but stays on disk.
// Returns the new path.
std::filesystem::path SetAsideCorruptStep(const std::filesystem::path& root, int64_t step);

}  // namespace headroom::checkpoint
