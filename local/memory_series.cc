#include "local/memory_series.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/checkpoint/durable_file.h"
#include "core/guard/step_record_memory.h"
#include "core/guard/trace.h"

namespace headroom::local {

std::vector<protocol::StepRecord> MemorySeries::WorstPerStep() const {
  std::vector<protocol::StepRecord> rows;
  std::map<std::pair<int, int64_t>, size_t> index;  // (generation, step) -> row
  for (const protocol::StepRecord& r : records_) {
    auto key = std::make_pair(r.generation, r.step);
    auto it = index.find(key);
    if (it == index.end()) {
      index[key] = rows.size();
      rows.push_back(r);
      continue;
    }
    protocol::StepRecord& w = rows[it->second];
    w.host_bytes = std::max(w.host_bytes, r.host_bytes);
    w.host_peak_bytes = std::max(w.host_peak_bytes, r.host_peak_bytes);
    w.gpu_reserved_bytes = std::max(w.gpu_reserved_bytes, r.gpu_reserved_bytes);
    w.gpu_peak_bytes = std::max(w.gpu_peak_bytes, r.gpu_peak_bytes);
    w.tokens = std::max(w.tokens, r.tokens);
    w.host_limit_bytes = std::max(w.host_limit_bytes, r.host_limit_bytes);
    w.gpu_total_bytes = std::max(w.gpu_total_bytes, r.gpu_total_bytes);
  }
  return rows;
}

void MemorySeries::WriteCsv(const std::string& trace_path, const std::string& by_rank_path) const {
  // Both files in replay's trace format (core/guard/trace.h), from what the guard reads
  // of each record: the by-rank file adds who measured it and two of its other fields.
  std::vector<guard::StepMemory> worst;
  for (const protocol::StepRecord& r : WorstPerStep()) worst.push_back(guard::StepMemoryOf(r));
  checkpoint::ReplaceFileAtomically(trace_path, guard::FormatTrace(worst));

  std::vector<guard::StepMemory> all;
  for (const protocol::StepRecord& r : records_) all.push_back(guard::StepMemoryOf(r));
  std::istringstream rows(guard::FormatTrace(all));
  std::string row;
  std::getline(rows, row);
  std::ostringstream by_rank;
  by_rank << "generation,rank," << row << ",reward_mean,step_seconds\n";
  for (const protocol::StepRecord& r : records_) {
    std::getline(rows, row);
    by_rank << r.generation << ',' << r.rank << ',' << row << ',' << r.reward_mean << ',' << r.step_seconds << "\n";
  }
  checkpoint::ReplaceFileAtomically(by_rank_path, by_rank.str());
}

}  // namespace headroom::local
