// Whether the binaries `headroom run` is about to start were built from the sources as
// they are now. A build that is stale (a source changed, appeared or vanished since) or
// did not finish (a binary is newer than the stamp written after all three link) would
// otherwise run old code without a word.
//
// The stamp is bin/headroom.build-stamp, written by cmake/build_stamp.cmake; its format is
// documented there. Binaries without a stamp outside a build tree (installed, in an image)
// and stamps whose source tree is gone are not checked.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace headroom::local {

// Set to 1 to run a build the check finds stale (a developer trying an edit without
// rebuilding everything); the warning is still printed.
inline constexpr const char* kAllowStaleBuildEnv = "HEADROOM_ALLOW_STALE_BUILD";

struct BuildFreshness {
  bool fresh = true;    // false: `problem` says what is wrong
  std::string problem;  // one line: what is stale or unfinished, and what to run
};

// Checks the build in `bin_dir` (where `binaries` live, the stamp beside them).
// Never throws: an unreadable stamp is reported as a problem, not an exception.
BuildFreshness CheckBuildFreshness(const std::filesystem::path& bin_dir, const std::vector<std::string>& binaries);

}  // namespace headroom::local
