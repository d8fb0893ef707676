#include "worker/tasks/task.h"

#include <algorithm>
#include <stdexcept>

#include "core/spec/task_shapes.h"
#include "worker/tasks/counter_rng.h"
#include "worker/tasks/reward.h"
#include "worker/tasks/tokenizer.h"

namespace headroom::worker {
namespace {

// Distinct stream ids keep the three tasks' problems unrelated for the same seed.
constexpr uint64_t kAdditionStream = 0xADD;
constexpr uint64_t kReverseStream = 0x5E7;
constexpr uint64_t kSortStream = 0x507;

std::string RandomDigits(CounterRng& rng, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s.push_back(static_cast<char>('0' + rng.Below(10)));
  return s;
}

class DigitTask : public Task {
 public:
  DigitTask(std::string name, int digits, uint64_t seed, uint64_t stream)
      : name_(std::move(name)), digits_(digits), seed_(seed), stream_(stream) {}
  std::string name() const override { return name_; }
  int64_t prompt_tokens() const override { return spec::PromptTokens(name_, digits_); }
  int64_t answer_tokens() const override { return spec::MaxAnswerTokens(name_, digits_); }
  ResponseFormat response_format() const override {
    return CharTokenizer::Format();
  }
  double Score(const Problem& problem, const int64_t* response, int64_t n) const override {
    return ScoreResponse(problem.answer, response, n);
  }

 protected:
  CounterRng RngFor(uint64_t global_index) const { return CounterRng(MixKey(seed_, stream_, global_index)); }
  static Problem Finish(std::string prompt, std::string answer) {
    Problem p;
    p.prompt_tokens = CharTokenizer::EncodePrompt(prompt);
    p.prompt = std::move(prompt);
    p.answer = std::move(answer);
    return p;
  }

  std::string name_;
  int digits_;
  uint64_t seed_;
  uint64_t stream_;
};

class AdditionTask final : public DigitTask {
 public:
  AdditionTask(int digits, uint64_t seed) : DigitTask("addition", digits, seed, kAdditionStream) {}
  Problem Make(uint64_t global_index) const override {
    CounterRng rng = RngFor(global_index);
    std::string a = RandomDigits(rng, digits_);
    std::string b = RandomDigits(rng, digits_);
    // Column addition on the strings: exact for any digit count (no integer overflow).
    std::string sum(digits_ + 1, '0');
    int carry = 0;
    for (int i = digits_ - 1; i >= 0; --i) {
      int d = (a[i] - '0') + (b[i] - '0') + carry;
      sum[i + 1] = static_cast<char>('0' + d % 10);
      carry = d / 10;
    }
    sum[0] = static_cast<char>('0' + carry);
    return Finish(a + "+" + b + "=", sum);
  }
};

class ReverseTask final : public DigitTask {
 public:
  ReverseTask(int digits, uint64_t seed) : DigitTask("reverse", digits, seed, kReverseStream) {}
  Problem Make(uint64_t global_index) const override {
    CounterRng rng = RngFor(global_index);
    std::string d = RandomDigits(rng, digits_);
    return Finish(d + ">", std::string(d.rbegin(), d.rend()));
  }
};

class SortTask final : public DigitTask {
 public:
  SortTask(int digits, uint64_t seed) : DigitTask("sort", digits, seed, kSortStream) {}
  Problem Make(uint64_t global_index) const override {
    CounterRng rng = RngFor(global_index);
    std::string d = RandomDigits(rng, digits_);
    std::string sorted = d;
    std::sort(sorted.begin(), sorted.end());
    return Finish(d + ">", sorted);
  }
};

}  // namespace

std::unique_ptr<Task> MakeTask(const std::string& name, int digits, uint64_t seed) {
  if (digits < 1) throw std::invalid_argument("task.digits: must be >= 1, got " + std::to_string(digits));
  if (name == "addition") return std::make_unique<AdditionTask>(digits, seed);
  if (name == "reverse") return std::make_unique<ReverseTask>(digits, seed);
  if (name == "sort") return std::make_unique<SortTask>(digits, seed);
  std::string known;
  for (const std::string& n : spec::TaskNames()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("task.name: unknown task \"" + name + "\" (" + known + ")");
}

}  // namespace headroom::worker
