#include "core/metrics/prometheus_text.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

namespace headroom::metrics {

namespace {

bool ParseValue(const std::string& text, double* out) {
  if (text == "NaN") {
    *out = std::nan("");
    return true;
  }
  if (text == "+Inf" || text == "Inf") {
    *out = INFINITY;
    return true;
  }
  if (text == "-Inf") {
    *out = -INFINITY;
    return true;
  }
  char* end = nullptr;
  *out = std::strtod(text.c_str(), &end);
  return end != text.c_str() && *end == '\0';
}

// Parses `{a="x",b="y"}` starting at line[*pos] == '{'; leaves *pos after the '}'.
bool ParseLabels(const std::string& line, size_t* pos, std::map<std::string, std::string>* labels) {
  size_t i = *pos + 1;
  for (;;) {
    while (i < line.size() && (line[i] == ' ' || line[i] == ',')) ++i;
    if (i >= line.size()) return false;
    if (line[i] == '}') {
      *pos = i + 1;
      return true;
    }
    size_t eq = line.find('=', i);
    if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') return false;
    std::string key = line.substr(i, eq - i);
    std::string value;
    size_t j = eq + 2;
    for (; j < line.size() && line[j] != '"'; ++j) {
      if (line[j] == '\\' && j + 1 < line.size()) {
        ++j;
        value += line[j] == 'n' ? '\n' : line[j];
      } else {
        value += line[j];
      }
    }
    if (j >= line.size()) return false;
    (*labels)[key] = value;
    i = j + 1;
  }
}

}  // namespace

std::vector<MetricSample> ParsePrometheusText(const std::string& text) {
  std::vector<MetricSample> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    MetricSample s;
    size_t i = start;
    while (i < line.size() && line[i] != '{' && line[i] != ' ' && line[i] != '\t') ++i;
    s.name = line.substr(start, i - start);
    if (i < line.size() && line[i] == '{' && !ParseLabels(line, &i, &s.labels)) continue;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t end = line.find_first_of(" \t", i);
    std::string value = line.substr(i, end == std::string::npos ? std::string::npos : end - i);
    if (s.name.empty() || !ParseValue(value, &s.value)) continue;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace headroom::metrics
