// Tokenizer, task generation and rewards: formats as core/spec/task_shapes.h documents
// them, determinism by (seed, index), and the reward's exact and partial credit.
#include <gtest/gtest.h>

#include <set>

#include "core/spec/model_presets.h"
#include "core/spec/task_shapes.h"
#include "worker/tasks/counter_rng.h"
#include "worker/tasks/reward.h"
#include "worker/tasks/task.h"
#include "worker/tasks/tokenizer.h"

namespace headroom::worker {
namespace {

std::vector<int64_t> Response(const std::string& text, bool eos = true) {
  auto ids = CharTokenizer::Encode(text);
  if (eos) {  // a rollout pads after EOS; without EOS every generated token counts
    ids.push_back(CharTokenizer::kEos);
    while (ids.size() < 8) ids.push_back(CharTokenizer::kPad);
  }
  return ids;
}

double Score(const std::string& answer, const std::string& text, bool eos = true) {
  auto ids = Response(text, eos);
  return ScoreResponse(answer, ids.data(), static_cast<int64_t>(ids.size()));
}

TEST(Tokenizer, RoundTripsAndFitsTheSpecVocabulary) {
  EXPECT_EQ(CharTokenizer::kVocabSize, spec::kVocabSize);
  auto ids = CharTokenizer::EncodePrompt("120+9=>");
  EXPECT_EQ(ids.front(), CharTokenizer::kBos);
  for (auto id : ids) EXPECT_LT(id, CharTokenizer::kVocabSize);
  ids.push_back(CharTokenizer::kEos);
  EXPECT_EQ(CharTokenizer::DecodeUntilEos(ids.data() + 1, static_cast<int64_t>(ids.size()) - 1), "120+9=>");
}

TEST(Tokenizer, RejectsUnknownCharactersByName) {
  try {
    CharTokenizer::Encode("12a");
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'a' at offset 2"), std::string::npos) << e.what();
  }
}

TEST(Tasks, FormatsMatchTheSpecShapes) {
  for (const std::string name : {"addition", "reverse", "sort"}) {
    for (int digits : {1, 3, 5}) {
      auto task = MakeTask(name, digits, 7);
      auto p = task->Make(11);
      EXPECT_EQ(static_cast<int>(p.prompt_tokens.size()), spec::PromptTokens(name, digits)) << name;
      EXPECT_EQ(task->prompt_tokens(), spec::PromptTokens(name, digits)) << name;
      EXPECT_EQ(task->answer_tokens(), spec::MaxAnswerTokens(name, digits)) << name;
      EXPECT_EQ(static_cast<int64_t>(p.answer.size()) + 1, task->answer_tokens()) << name;
    }
  }
}

TEST(Tasks, AnswersAreCorrect) {
  for (uint64_t i = 0; i < 200; ++i) {
    auto add = MakeTask("addition", 3, 1)->Make(i);
    const int a = std::stoi(add.prompt.substr(0, 3)), b = std::stoi(add.prompt.substr(4, 3));
    EXPECT_EQ(add.prompt.size(), 8u);
    EXPECT_EQ(add.prompt.substr(3, 1), "+");
    EXPECT_EQ(add.prompt.back(), '=');
    EXPECT_EQ(std::stoi(add.answer), a + b) << add.prompt;
    EXPECT_EQ(add.answer.size(), 4u);

    auto rev = MakeTask("reverse", 4, 1)->Make(i);
    EXPECT_EQ(rev.answer, std::string(rev.prompt.rbegin() + 1, rev.prompt.rend()));
    auto srt = MakeTask("sort", 4, 1)->Make(i);
    std::string digits = srt.prompt.substr(0, 4);
    std::sort(digits.begin(), digits.end());
    EXPECT_EQ(srt.answer, digits);
  }
}

TEST(Tasks, DeterministicInSeedAndIndexOnly) {
  auto a = MakeTask("reverse", 6, 5), b = MakeTask("reverse", 6, 5), c = MakeTask("reverse", 6, 6);
  // Asking in a different order (as another rank would) changes nothing.
  EXPECT_EQ(a->Make(42).prompt, b->Make(42).prompt);
  b->Make(1);
  EXPECT_EQ(a->Make(42).prompt, b->Make(42).prompt);
  int differ = 0;
  std::set<std::string> distinct;
  for (uint64_t i = 0; i < 100; ++i) {
    differ += a->Make(i).prompt != c->Make(i).prompt;
    distinct.insert(a->Make(i).prompt);
  }
  EXPECT_GT(differ, 95);
  EXPECT_GT(distinct.size(), 95u);
}

TEST(Tasks, BadNamesAndDigitsAreNamed) {
  EXPECT_THROW(MakeTask("division", 3, 1), std::invalid_argument);
  EXPECT_THROW(MakeTask("reverse", 0, 1), std::invalid_argument);
}

TEST(Reward, ExactAnswerNeedsEos) {
  EXPECT_DOUBLE_EQ(Score("321", "321"), 1.0);
  // Right characters but never stopped: partial (3 of 4 target positions), not exact.
  EXPECT_DOUBLE_EQ(Score("321", "321", /*eos=*/false), 0.5 * 3.0 / 4.0);
}

TEST(Reward, PartialCreditPerPositionEosIncluded) {
  // Target "321" + EOS: four positions.
  EXPECT_DOUBLE_EQ(Score("321", "301"), 0.5 * 3.0 / 4.0);  // 3, 1, EOS
  EXPECT_DOUBLE_EQ(Score("321", "3"), 0.5 * 1.0 / 4.0);    // 3 (EOS one too early)
  // Extra characters widen the denominator.
  EXPECT_DOUBLE_EQ(Score("321", "3210"), 0.5 * 3.0 / 5.0);
  // Wrong digits, right stopping place: the EOS position alone.
  EXPECT_DOUBLE_EQ(Score("321", "999"), 0.5 * 1.0 / 4.0);
  EXPECT_DOUBLE_EQ(Score("321", "99", /*eos=*/false), 0.0);
}

TEST(Reward, EmptyOrGarbageIsZero) {
  EXPECT_DOUBLE_EQ(Score("321", ""), 0.0);
  std::vector<int64_t> garbage{CharTokenizer::kBos, CharTokenizer::kPad, 20, 31};
  EXPECT_DOUBLE_EQ(ScoreResponse("321", garbage.data(), 4), 0.0);
}

TEST(CounterRng, UniformIsOpenIntervalAndKeyed) {
  CounterRng a(MixKey(1, 2, 3)), b(MixKey(1, 2, 3)), c(MixKey(1, 2, 4));
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = a.Uniform();
    EXPECT_GT(u, 0.0);
    EXPECT_LT(u, 1.0);
    EXPECT_EQ(u, b.Uniform());
    sum += u;
    (void)c.Next();
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
  EXPECT_NE(CounterRng(MixKey(1, 2, 3)).Next(), CounterRng(MixKey(1, 2, 4)).Next());
}

}  // namespace
}  // namespace headroom::worker
