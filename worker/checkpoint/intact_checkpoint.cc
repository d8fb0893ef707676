#include <spdlog/spdlog.h>

#include "worker/checkpoint/intact_checkpoint.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "worker/checkpoint/checkpoint_format.h"
#include "worker/checkpoint/rank_agreement.h"

namespace headroom::worker {
namespace {

// The steps to try, newest first: `latest`'s, then every older complete one. A `latest`
// that is missing, malformed or names a missing step leaves all complete steps as
// candidates (checkpoint::FindLatestStep). `named` is whether `latest` named the first.
std::vector<int64_t> Candidates(const std::filesystem::path& root, bool& named) {
  std::vector<int64_t> steps = CompleteSteps(root);
  const std::optional<checkpoint::LatestStep> latest = checkpoint::FindLatestStep(root);
  named = latest && latest->fallback.empty();
  if (latest && !named) spdlog::warn("checkpoint: {}; trying every complete step, newest first", latest->fallback);
  if (named) {
    steps.erase(std::remove_if(steps.begin(), steps.end(), [&](int64_t s) { return s > latest->step; }), steps.end());
  }
  std::reverse(steps.begin(), steps.end());
  return steps;
}

// "" when this rank's checks of `step_dir` pass, else what failed.
std::string CheckShare(const std::filesystem::path& step_dir, int rank, int world) {
  try {
    const CheckpointManifest manifest = CheckpointManifest::Read(step_dir);
    int index = 0;
    for (const auto& [file, bytes] : manifest.file_bytes) {
      if (index++ % world == rank) manifest.VerifyFile(step_dir, file);
    }
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace

std::optional<CheckpointReader> OpenNewestIntactCheckpoint(const std::filesystem::path& root, Communicator& comm) {
  bool named = false;
  const std::vector<int64_t> candidates = Candidates(root, named);
  // Nothing saved yet. A `latest` naming a step that is gone, with no other step left,
  // is not that: it is refused below.
  if (candidates.empty() && !std::filesystem::exists(root / kLatestFileName)) return std::nullopt;
  std::vector<std::string> failures;
  for (int64_t step : candidates) {
    const std::filesystem::path dir = root / StepDirName(step);
    std::set<std::string> problems;
    for (const std::string& p : AllGatherBytes(comm, CheckShare(dir, comm.rank(), comm.world_size()))) {
      if (!p.empty()) problems.insert(p);
    }
    if (problems.empty()) {
      // `latest` names what was resumed from, so the supervisor and an export see the same.
      if ((!failures.empty() || !named) && comm.rank() == 0) WriteLatest(root, step);
      return CheckpointReader(dir);
    }
    std::string why;
    for (const std::string& p : problems) why += (why.empty() ? "" : "; ") + p;
    failures.push_back(why);
    if (comm.rank() == 0) {
      const auto aside = checkpoint::SetAsideCorruptStep(root, step);
      spdlog::warn("checkpoint: skipping {}: {}. Set aside as {}; resuming from the newest intact step instead",
                   dir.string(), why, aside.string());
    }
  }
  std::string all;
  for (const std::string& f : failures) all += "\n  " + f;
  throw CheckpointError("checkpoint " + root.string() + ": no intact step to resume from (" +
                        std::to_string(failures.size()) + " tried):" + all + "\nThe damaged steps are kept as step-N" +
                        kCorruptSuffix + "; to start over, use a new checkpoint directory");
}

}  // namespace headroom::worker
