#include "core/spec/task_shapes.h"

namespace headroom::spec {
namespace {

constexpr int kBos = 1;
constexpr int kEos = 1;

// A `digits`-long run "123456789012..." for examples.
std::string SampleDigits(int digits, int offset) {
  std::string s;
  for (int i = 0; i < digits; ++i) s.push_back(static_cast<char>('0' + (i + offset) % 9 + 1));
  return s;
}

}  // namespace

std::vector<std::string> TaskNames() { return {"addition", "reverse", "sort"}; }

bool IsKnownTask(const std::string& name) { return name == "addition" || name == "reverse" || name == "sort"; }

int PromptTokens(const std::string& name, int digits) {
  if (digits < 1) return 0;
  if (name == "addition") return kBos + digits + 1 + digits + 1;      // A + B =
  if (name == "reverse" || name == "sort") return kBos + digits + 1;  // D >
  return 0;
}

int MaxAnswerTokens(const std::string& name, int digits) {
  if (digits < 1) return 0;
  if (name == "addition") return digits + 1 + kEos;  // a carry adds a digit
  if (name == "reverse" || name == "sort") return digits + kEos;
  return 0;
}

std::string PromptExample(const std::string& name, int digits) {
  if (name == "addition") {
    return "BOS + \"" + SampleDigits(digits, 0) + "+" + SampleDigits(digits, digits) + "=\"";
  }
  return "BOS + \"" + SampleDigits(digits, 0) + ">\"";
}

}  // namespace headroom::spec
