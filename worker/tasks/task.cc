#include "worker/tasks/task.h"

#include <algorithm>
#include <stdexcept>

#include "core/spec/task_shapes.h"
#include "worker/tasks/counter_rng.h"
#include "worker/tasks/reward.h"
#include "worker/tasks/tokenizer.h"

namespace headroom::worker {
namespace {

std::string RandomDigits(CounterRng& rng, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s.push_back(static_cast<char>('0' + rng.Below(10)));
  return s;
}

// A problem's text: the prompt and its answer.
struct ProblemText {
  std::string prompt;
  std::string answer;
};

ProblemText AdditionText(CounterRng& rng, int digits) {
  std::string a = RandomDigits(rng, digits);
  std::string b = RandomDigits(rng, digits);
  // Column addition on the strings: exact for any digit count (no integer overflow).
  std::string sum(digits + 1, '0');
  int carry = 0;
  for (int i = digits - 1; i >= 0; --i) {
    int d = (a[i] - '0') + (b[i] - '0') + carry;
    sum[i + 1] = static_cast<char>('0' + d % 10);
    carry = d / 10;
  }
  sum[0] = static_cast<char>('0' + carry);
  return {a + "+" + b + "=", sum};
}

ProblemText ReverseText(CounterRng& rng, int digits) {
  std::string d = RandomDigits(rng, digits);
  return {d + ">", std::string(d.rbegin(), d.rend())};
}

ProblemText SortText(CounterRng& rng, int digits) {
  std::string d = RandomDigits(rng, digits);
  std::string sorted = d;
  std::sort(sorted.begin(), sorted.end());
  return {d + ">", sorted};
}

// The generated tasks. Distinct stream ids keep their problems unrelated for the same seed.
struct DigitTaskKind {
  const char* name;
  uint64_t stream;
  ProblemText (*text)(CounterRng& rng, int digits);
};

constexpr DigitTaskKind kDigitTasks[] = {
    {"addition", 0xADD, AdditionText},
    {"reverse", 0x5E7, ReverseText},
    {"sort", 0x507, SortText},
};

class DigitTask final : public Task {
 public:
  DigitTask(const DigitTaskKind& kind, int digits, uint64_t seed) : kind_(kind), digits_(digits), seed_(seed) {}
  std::string name() const override { return kind_.name; }
  int64_t prompt_tokens() const override { return spec::PromptTokens(kind_.name, digits_); }
  int64_t answer_tokens() const override { return spec::MaxAnswerTokens(kind_.name, digits_); }
  ResponseFormat response_format() const override { return CharTokenizer::Format(); }
  double Score(const Problem& problem, const int64_t* response, int64_t n) const override {
    return ScoreResponse(problem.answer, response, n);
  }
  Problem Make(uint64_t global_index) const override {
    CounterRng rng(MixKey(seed_, kind_.stream, global_index));
    ProblemText text = kind_.text(rng, digits_);
    Problem p;
    p.prompt_tokens = CharTokenizer::EncodePrompt(text.prompt);
    p.prompt = std::move(text.prompt);
    p.answer = std::move(text.answer);
    return p;
  }

 private:
  const DigitTaskKind& kind_;
  int digits_;
  uint64_t seed_;
};

}  // namespace

std::unique_ptr<Task> MakeTask(const std::string& name, int digits, uint64_t seed) {
  if (digits < 1) throw std::invalid_argument("task.digits: must be >= 1, got " + std::to_string(digits));
  for (const DigitTaskKind& kind : kDigitTasks) {
    if (name == kind.name) return std::make_unique<DigitTask>(kind, digits, seed);
  }
  std::string known;
  for (const std::string& n : spec::TaskNames()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("task.name: unknown task \"" + name + "\" (" + known + ")");
}

}  // namespace headroom::worker
