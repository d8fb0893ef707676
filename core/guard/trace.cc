#include "core/guard/trace.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "core/base/trim.h"

namespace headroom::guard {

namespace {

struct Column {
  const char* name;
  int64_t StepMemory::*field;  // nullptr for "step" (an int)
  bool required;
};

const Column kColumns[] = {
    {"step", nullptr, true},
    {"host_bytes", &StepMemory::host_bytes, true},
    {"gpu_bytes", &StepMemory::gpu_bytes, true},
    {"host_peak_bytes", &StepMemory::host_peak_bytes, false},
    {"gpu_peak_bytes", &StepMemory::gpu_peak_bytes, false},
    {"tokens", &StepMemory::tokens, false},
    {"host_limit_bytes", &StepMemory::host_limit_bytes, false},
    {"gpu_limit_bytes", &StepMemory::gpu_limit_bytes, false},
};

std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) cells.push_back(Trim(cell));
  if (!line.empty() && line.back() == ',') cells.push_back("");
  return cells;
}

}  // namespace

std::vector<StepMemory> ParseTrace(const std::string& csv_text, const std::string& source) {
  std::istringstream in(csv_text);
  std::string line;
  int line_no = 0;
  std::vector<const Column*> header;
  std::vector<StepMemory> steps;
  auto fail = [&](const std::string& what) { throw TraceError(source + ":" + std::to_string(line_no) + ": " + what); };
  while (std::getline(in, line)) {
    ++line_no;
    std::string t = Trim(line);
    if (t.empty() || t[0] == '#') continue;
    std::vector<std::string> cells = SplitCsv(t);
    if (header.empty()) {
      std::map<std::string, int> seen;
      for (const std::string& name : cells) {
        const Column* col = nullptr;
        for (const Column& c : kColumns) {
          if (name == c.name) col = &c;
        }
        if (col == nullptr) {
          fail("unknown column '" + name +
               "' (expected step, host_bytes, gpu_bytes, host_peak_bytes, gpu_peak_bytes, tokens, "
               "host_limit_bytes, gpu_limit_bytes)");
        }
        if (seen[name]++) fail("column '" + name + "' appears twice");
        header.push_back(col);
      }
      for (const Column& c : kColumns) {
        if (c.required && !seen.count(c.name)) fail(std::string("header lacks the required column '") + c.name + "'");
      }
      continue;
    }
    if (cells.size() != header.size()) {
      fail("expected " + std::to_string(header.size()) + " columns, got " + std::to_string(cells.size()));
    }
    StepMemory m;
    for (size_t i = 0; i < cells.size(); ++i) {
      const std::string& cell = cells[i];
      errno = 0;
      char* end = nullptr;
      long long v = std::strtoll(cell.c_str(), &end, 10);
      if (cell.empty() || errno != 0 || end != cell.c_str() + cell.size()) {
        fail(std::string("column ") + header[i]->name + ": not an integer: '" + cell + "'");
      }
      if (v < 0) fail(std::string("column ") + header[i]->name + ": must be >= 0, got " + cell);
      if (header[i]->field == nullptr) {
        if (v > 1000000000) fail("column step: too large: " + cell);
        m.step = static_cast<int>(v);
      } else {
        m.*(header[i]->field) = v;
      }
    }
    if (!steps.empty() && m.step <= steps.back().step) {
      fail("column step: steps must increase, got " + std::to_string(m.step) + " after " +
           std::to_string(steps.back().step));
    }
    steps.push_back(m);
  }
  if (header.empty()) throw TraceError(source + ": empty trace (no header row)");
  return steps;
}

std::vector<StepMemory> ReadTraceFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw TraceError(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ParseTrace(ss.str(), path);
}

std::string FormatTrace(const std::vector<StepMemory>& steps) {
  std::ostringstream out;
  for (size_t i = 0; i < std::size(kColumns); ++i) out << (i ? "," : "") << kColumns[i].name;
  out << "\n";
  for (const StepMemory& m : steps) {
    out << m.step;
    for (size_t i = 1; i < std::size(kColumns); ++i) out << "," << m.*(kColumns[i].field);
    out << "\n";
  }
  return out.str();
}

}  // namespace headroom::guard
