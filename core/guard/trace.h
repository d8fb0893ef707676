// A recorded memory trace: one StepMemory per row, from CSV (what `headroom replay`
// reads, what `headroom run` saves in its workdir, what tests and the bench replay).
//
// Format (docs/design.md): a header row naming the columns, then one row per step. Required
// columns: step, host_bytes, gpu_bytes. Optional: host_peak_bytes, gpu_peak_bytes, tokens,
// host_limit_bytes, gpu_limit_bytes. Columns in any order; unknown columns are an error
// (a typo must not be silently ignored). Blank lines and lines starting with '#' are
// skipped. Values are non-negative integers.
//
// Contract: ParseTrace throws TraceError with the 1-based line and the column name:
// "trace.csv:7: column host_bytes: not an integer: '12x'".
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "core/guard/forecaster.h"

namespace headroom::guard {

class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::vector<StepMemory> ParseTrace(const std::string& csv_text, const std::string& source = "trace");
std::vector<StepMemory> ReadTraceFile(const std::string& path);
// Writes every column (header included).
std::string FormatTrace(const std::vector<StepMemory>& steps);

}  // namespace headroom::guard
