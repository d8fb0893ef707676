#include "core/checkpoint/checkpoint_layout.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "core/files/remove_tree.h"
#include "core/checkpoint/durable_file.h"

namespace headroom::checkpoint {

std::string StepDirName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%06lld", static_cast<long long>(step));
  return name;
}

std::string RankFileName(int rank) {
  char name[32];
  std::snprintf(name, sizeof(name), "rank-%05d.bin", rank);
  return name;
}

std::optional<int64_t> ParseStepDirName(const std::string& name) {
  if (name.size() < 11 || name.rfind("step-", 0) != 0) return std::nullopt;
  int64_t step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || step > (int64_t{1} << 50)) return std::nullopt;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

std::vector<int64_t> CompleteSteps(const std::filesystem::path& root) {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    auto step = ParseStepDirName(entry.path().filename().string());
    if (step && std::filesystem::exists(entry.path() / kManifestFileName)) steps.push_back(*step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::optional<std::filesystem::path> LatestCheckpoint(const std::filesystem::path& root) {
  const auto latest = root / kLatestFileName;
  if (!std::filesystem::exists(latest)) return std::nullopt;
  std::string name = ReadWholeFile(latest);
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  if (!ParseStepDirName(name)) {
    throw CheckpointError(latest.string() + ": expected a step directory name like step-000120, found '" + name + "'");
  }
  if (std::filesystem::exists(root / name / kManifestFileName)) return root / name;
  auto steps = CompleteSteps(root);
  if (steps.empty()) {
    throw CheckpointError(latest.string() + " names " + name + ", which has no " + kManifestFileName +
                          ", and no other complete step exists in " + root.string());
  }
  std::cerr << "warning: checkpoint: " << latest.string() << " names " << name << ", which has no "
            << kManifestFileName << "; using " << StepDirName(steps.back()) << " instead\n";
  return root / StepDirName(steps.back());
}

std::filesystem::path StepDirOf(const std::filesystem::path& checkpoint) {
  if (std::filesystem::exists(checkpoint / kManifestFileName)) return checkpoint;
  if (auto step = LatestCheckpoint(checkpoint)) return *step;
  throw CheckpointError(checkpoint.string() + ": neither a checkpoint step (no " + kManifestFileName +
                        ") nor a checkpoint directory (no " + kLatestFileName + ")");
}

void WriteLatest(const std::filesystem::path& root, int64_t step) {
  ReplaceFileAtomically(root / kLatestFileName, StepDirName(step) + "\n");
}

std::vector<std::string> PruneCheckpoints(const std::filesystem::path& root, int keep) {
  keep = std::max(keep, 1);
  std::optional<std::string> latest;
  if (auto dir = LatestCheckpoint(root)) latest = dir->filename().string();
  auto steps = CompleteSteps(root);
  std::vector<std::string> doomed;
  for (size_t i = 0; i + static_cast<size_t>(keep) < steps.size(); ++i) {
    if (StepDirName(steps[i]) != latest) doomed.push_back(StepDirName(steps[i]));
  }
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    const bool partial = name.size() > std::strlen(kPartialSuffix) &&
                         name.compare(name.size() - std::strlen(kPartialSuffix), std::string::npos, kPartialSuffix) == 0;
    const bool incomplete = ParseStepDirName(name) && !std::filesystem::exists(entry.path() / kManifestFileName);
    if (entry.is_directory() && (partial || incomplete)) doomed.push_back(name);
  }
  for (const auto& name : doomed) {
    files::RemoveTree(root / name, ec);
    if (ec) std::cerr << "warning: checkpoint: could not remove " << (root / name).string() << ": " << ec.message() << "\n";
  }
  if (!doomed.empty()) SyncDirectory(root);
  return doomed;
}

std::filesystem::path SetAsideCorruptStep(const std::filesystem::path& root, int64_t step) {
  const std::filesystem::path aside = root / (StepDirName(step) + kCorruptSuffix);
  files::RemoveTree(aside);
  std::filesystem::rename(root / StepDirName(step), aside);
  SyncDirectory(root);
  return aside;
}

}  // namespace headroom::checkpoint
