// The run's record files (summary.json, memory.csv, memory.svg) are replaced whole or not
// at all: a full disk or a kill mid-write leaves the previous file as it was, never a
// truncated one.
#pragma once

#include <string>

namespace headroom::local {

// Writes `text` to PATH.tmp, fsyncs it, renames it onto `path` and fsyncs the directory.
// Throws std::runtime_error "cannot write PATH: REASON" (ENOSPC: "No space left on
// device") with `path` untouched and no PATH.tmp left behind.
void WriteFileAtomically(const std::string& path, const std::string& text);

}  // namespace headroom::local
