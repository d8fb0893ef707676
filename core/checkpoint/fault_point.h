// Named points in the checkpoint and export sequence where a drill can kill the process,
// so a test can show what a crash at exactly that instant keeps (README, "What survives
// what").
//
// $HEADROOM_KILL_AT (core/protocol/environment.h) names one point, optionally with the
// step: "checkpoint_manifest_written" kills the process the first time any step reaches
// that point, "checkpoint_manifest_written@2" only while step 2 is being saved. The
// points, in the order a save and the end-of-job export pass them:
//   checkpoint_tensors_written   this rank's tensor file durable; no manifest yet
//   checkpoint_manifest_written  manifest.json written into step-N.partial; not renamed
//   checkpoint_published         step-N in place; `latest` still names the previous step
//   export_written               hf-export.partial complete; not yet renamed to hf-export
//
// Contract: ReachedFaultPoint(point, step) returns at once when the variable is unset or
// names another point or step (the variable is read once per process); otherwise it sends
// the process SIGKILL, as the kernel's OOM killer or `kill -9` would, and does not return.
#pragma once

#include <cstdint>

namespace headroom::checkpoint {

void ReachedFaultPoint(const char* point, int64_t step);

}  // namespace headroom::checkpoint
