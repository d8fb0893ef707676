// CLI11 parsing shared by headroom-worker's inspection commands (logits, generate,
// tokenize), so that --help and usage errors behave the same in each.
#pragma once

#include <optional>
#include <ostream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "core/protocol/exit_codes.h"

namespace headroom::worker {

// Parses argv into `app`; argv[0], the command's name, stands where CLI11 expects the
// program. Returns nullopt when the command should run, else the exit code to end it with:
// --help prints usage on `out` and is kExitFinished; a usage error prints CLI11's message
// on `err` and is kExitInvalidSpec.
inline std::optional<int> ParseArguments(CLI::App& app, int argc, const char* const* argv, std::ostream& out,
                                         std::ostream& err) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    std::ostringstream usage;
    const int code = app.exit(e, usage, usage);
    (code == 0 ? out : err) << usage.str();
    return code == 0 ? protocol::kExitFinished : protocol::kExitInvalidSpec;
  }
}

}  // namespace headroom::worker
