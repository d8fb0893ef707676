// libFuzzer target for the TrainingJob parser and the quantity parser.
//
// Beyond "no crash, no leak, no undefined behaviour", it checks two properties on every
// input, so the fuzzer also hunts logic bugs:
//   - a job that parses serializes (ToYaml, ToJsonValue) to something that parses back
//     to the same job;
//   - a quantity that parses has values that agree across scales (a value in thousandths
//     is never below 1000 times the value in units, rounded up).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "core/spec/quantity.h"
#include "core/spec/training_job.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "spec_fuzzer: %s\n%s\n", what, detail.c_str());
  std::abort();
}

void CheckQuantity(const std::string& text) {
  std::optional<headroom::spec::Quantity> q = headroom::spec::Quantity::Parse(text);
  if (!q) return;
  const std::optional<int64_t> units = q->Value();
  const std::optional<int64_t> millis = q->MilliValue();
  if (millis && !units) Fail("MilliValue fits but Value does not", text);
  if (units && millis) {
    // ceil(x) >= ceil(1000x)/1000 > ceil(x) - 1 for x > 0 (mirrored for x < 0).
    const __int128 u = *units, m = *millis;
    const bool consistent =
        q->negative() ? (m >= u * 1000 && m < (u + 1) * 1000) : (m <= u * 1000 && m > (u - 1) * 1000);
    if (!consistent) Fail("Value and MilliValue disagree", text);
  }
}

void CheckJob(const std::string& text) {
  using headroom::spec::ParseResult;
  ParseResult parsed = headroom::spec::ParseTrainingJob(text);
  for (const auto& e : parsed.errors) {
    const std::string line = e.ToString();
    if (e.message.empty()) Fail("error without a message", line);
    if (line.find('\n') != std::string::npos) Fail("error spans lines", line);
  }
  if (!parsed.ok()) return;
  const std::string yaml = headroom::spec::ToYaml(*parsed.job);
  ParseResult again = headroom::spec::ParseTrainingJob(yaml);
  if (!again.ok()) Fail("ToYaml output does not parse", yaml + "\n" + again.errors.front().ToString());
  if (!(*again.job == *parsed.job)) Fail("YAML round trip changed the job", yaml);
  ParseResult from_json = headroom::spec::ParseTrainingJobJson(headroom::spec::ToJsonValue(*parsed.job));
  if (!from_json.ok() || !(*from_json.job == *parsed.job)) Fail("JSON round trip changed the job", yaml);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (size <= 2 * headroom::spec::Quantity::kMaxLength) CheckQuantity(text);
  CheckJob(text);
  return 0;
}
