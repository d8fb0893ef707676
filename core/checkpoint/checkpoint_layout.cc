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

namespace {

// What `latest` says: the step name, "" when there is no `latest`; `malformed` when it
// holds something else.
std::string ReadLatestName(const std::filesystem::path& latest, bool& malformed) {
  malformed = false;
  std::error_code ec;
  if (!std::filesystem::exists(latest, ec)) return "";
  std::string name;
  try {
    name = ReadWholeFile(latest);
  } catch (const CheckpointError&) {
    malformed = true;
    return "";
  }
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  malformed = !ParseStepDirName(name);
  return name;
}

}  // namespace

std::optional<LatestStep> FindLatestStep(const std::filesystem::path& root) {
  const auto latest = root / kLatestFileName;
  bool malformed = false;
  const std::string name = ReadLatestName(latest, malformed);
  if (!malformed && !name.empty() && std::filesystem::exists(root / name / kManifestFileName)) {
    return LatestStep{root / name, *ParseStepDirName(name), ""};
  }
  const std::vector<int64_t> steps = CompleteSteps(root);
  if (steps.empty()) return std::nullopt;
  LatestStep found{root / StepDirName(steps.back()), steps.back(), ""};
  if (malformed) {
    found.fallback = latest.string() + " is not a step directory name like step-000120";
  } else if (name.empty()) {
    found.fallback = latest.string() + " is missing";
  } else {
    found.fallback = latest.string() + " names " + name + ", which has no " + kManifestFileName;
  }
  found.fallback += "; the newest complete step is " + StepDirName(found.step);
  return found;
}

std::optional<int64_t> LatestCheckpointStep(const std::filesystem::path& root) {
  const std::optional<LatestStep> found = FindLatestStep(root);
  return found ? std::optional<int64_t>(found->step) : std::nullopt;
}

std::optional<std::filesystem::path> LatestCheckpoint(const std::filesystem::path& root) {
  const auto latest = root / kLatestFileName;
  bool malformed = false;
  const std::string name = ReadLatestName(latest, malformed);
  if (malformed) {
    throw CheckpointError(latest.string() + ": expected a step directory name like step-000120, found '" + name + "'");
  }
  const std::optional<LatestStep> found = FindLatestStep(root);
  if (!found) {
    if (name.empty()) return std::nullopt;
    throw CheckpointError(latest.string() + " names " + name + ", which has no " + kManifestFileName +
                          ", and no other complete step exists in " + root.string());
  }
  if (!found->fallback.empty()) std::cerr << "warning: checkpoint: " << found->fallback << "; using it\n";
  return found->dir;
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
    const bool partial =
        name.size() > std::strlen(kPartialSuffix) &&
        name.compare(name.size() - std::strlen(kPartialSuffix), std::string::npos, kPartialSuffix) == 0;
    const bool incomplete = ParseStepDirName(name) && !std::filesystem::exists(entry.path() / kManifestFileName);
    if (entry.is_directory() && (partial || incomplete)) doomed.push_back(name);
  }
  for (const auto& name : doomed) {
    files::RemoveTree(root / name, ec);
    if (ec)
      std::cerr << "warning: checkpoint: could not remove " << (root / name).string() << ": " << ec.message() << "\n";
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
