// How the ranks of a collective checkpoint operation learn each other's outcome: small
// exchanges over the communicator (on its device, so they work with any backend).
#pragma once

#include <string>
#include <vector>

#include "worker/comm/communicator.h"

namespace headroom::worker {

// Collective: every rank's `bytes`, in rank order (two all_gathers: lengths, then the
// bytes padded to the longest).
std::vector<std::string> AllGatherBytes(Communicator& comm, const std::string& bytes);

// Collective: rank 0's `ok`, on every rank.
bool BroadcastOk(Communicator& comm, bool ok);

}  // namespace headroom::worker
