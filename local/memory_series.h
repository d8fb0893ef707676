// The memory series of a local run, kept per step and written to the work directory:
//
//   memory.csv          one row per step, the worst rank's numbers, in the trace format
//                       `headroom replay` reads (docs/design.md): step,host_bytes,gpu_bytes,
//                       host_peak_bytes,gpu_peak_bytes,tokens,host_limit_bytes,gpu_limit_bytes.
//                       A step redone after a crash appears again (replay's forecaster
//                       treats a repeated step as a restart from a checkpoint).
//   memory-by-rank.csv  every rank of every generation: generation,rank,step, the same
//                       columns, then reward_mean,step_seconds.
//
// Contract: Add() takes records in arrival order; rows of memory.csv are emitted when a
// (generation, step) is complete for every rank of that generation, or at Flush().
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/protocol/step_record.h"

namespace headroom::local {

class MemorySeries {
 public:
  void Add(const protocol::StepRecord& record) { records_.push_back(record); }
  const std::vector<protocol::StepRecord>& records() const { return records_; }

  // The worst rank per (generation, step), in order of first arrival.
  std::vector<protocol::StepRecord> WorstPerStep() const;

  // Writes both files, each atomically (core/checkpoint/durable_file.h); throws
  // std::runtime_error naming a file it cannot write, which keeps its previous contents.
  void WriteCsv(const std::string& trace_path, const std::string& by_rank_path) const;

 private:
  std::vector<protocol::StepRecord> records_;
};

}  // namespace headroom::local
