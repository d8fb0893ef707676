// Choosing the checkpoint step a run resumes from: the newest one every rank agrees is
// intact, so a truncated or bit-flipped newest step costs the steps since the previous
// one, not the run.
//
// Collective: every rank calls it with the same root. The candidates are the step
// `latest` names, then the older complete steps, newest first. For each, every rank
// opens it (manifest, tiling, file sizes) and hashes its share of the rank files (file i
// by rank i % world, so the whole step is read once, in parallel) against the sha256 the
// manifest recorded; the ranks exchange their outcomes and take the first candidate with
// none failing. A candidate that fails is warned about, naming the file and what is wrong,
// and rank 0 sets it aside as step-N.corrupt (kept for inspection; it is no longer a
// complete step, so neither a resume, an export nor pruning touches it) and points
// `latest` at the step chosen, so the supervisor and `headroom export` see the same.
#pragma once

#include <filesystem>
#include <optional>

#include "worker/checkpoint/checkpoint_reader.h"
#include "worker/comm/communicator.h"

namespace headroom::worker {

// The step to resume from; nullopt when the root holds no complete step and no `latest`
// (nothing saved yet). A missing `latest` with complete steps resumes from the newest
// intact one and writes `latest` again: it never starts the training over.
// Throws CheckpointError, naming every step tried and why it failed, when steps exist
// but none is intact.
std::optional<CheckpointReader> OpenNewestIntactCheckpoint(const std::filesystem::path& root, Communicator& comm);

}  // namespace headroom::worker
