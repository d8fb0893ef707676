// Any rank's stop becomes every rank's: at each step boundary the ranks all_reduce (MAX)
// one flag, so they all leave at the same step with the same exit code (docs/design.md,
// Worker). A guard stop outranks a drain: the guard's reason is the more useful one to
// act on, and both end in a resumable exit.
#pragma once

#include "worker/comm/communicator.h"

namespace headroom::worker {

enum class StopKind : int { kNone = 0, kDrain = 1, kGuard = 2 };

// Collective (every rank, every boundary, in the same order). Throws CommunicatorError
// when a peer is gone.
StopKind AgreeOnStop(Communicator& comm, bool drain_requested, bool guard_decided);

}  // namespace headroom::worker
