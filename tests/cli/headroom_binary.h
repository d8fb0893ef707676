// The tests of the `headroom` command run the built binary (skipped with the reason when
// this tree has not built it).
#pragma once

#include <sys/stat.h>

#include <string>

#include "tests/helpers/run_command.h"

namespace headroom::testing {

inline const std::string kHeadroomBinary = std::string(HEADROOM_BINARY_DIR) + "/bin/headroom";
inline const std::string kSourceDir = HEADROOM_SOURCE_DIR;

inline bool HaveHeadroomBinary() {
  struct stat st;
  return ::stat(kHeadroomBinary.c_str(), &st) == 0;
}

// `headroom ARGS`, its exit code and output.
inline CommandResult RunHeadroom(const std::string& args) { return RunCommand(kHeadroomBinary + " " + args); }

}  // namespace headroom::testing
