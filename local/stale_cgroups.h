// Memory cgroups a killed `headroom run` left behind. Its workers die with it (parent-death
// signal), but a supervisor killed with -9 never removes their cgroups, named
// "headroom-<job>-<pid>-g<G>-r<R>" (local_process_backend.cc). The next run sweeps them.
#pragma once

#include <string>

namespace headroom::local {

// Removes (rmdir) each directory in `hierarchy_dir` named as the local runtime names its
// cgroups whose supervisor pid is no longer alive. Only ours, only empty: rmdir fails on a
// cgroup with processes or children (and on a plain directory with entries), which is kept.
// Returns how many it removed; never throws.
int RemoveStaleCgroups(const std::string& hierarchy_dir);

}  // namespace headroom::local
