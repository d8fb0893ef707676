// Where the `headroom` CLI finds the headroom-worker program it runs (`headroom run`'s
// workers, `headroom plan`'s prompt lengths): $HEADROOM_WORKER_BIN when set, else the
// headroom-worker beside this executable (a build's bin/, an install's bin/).
#pragma once

#include <string>

namespace headroom::cli {

// A path to run (not searched in PATH): "headroom-worker" alone when this executable's own
// path cannot be read.
std::string FindWorkerBinary();

}  // namespace headroom::cli
