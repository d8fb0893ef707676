// Text rewards on worked examples in each format, the tricky ones included.
#include <gtest/gtest.h>

#include "worker/tasks/text_reward.h"

namespace headroom::worker {
namespace {

double Gsm8k(const std::string& response, const std::string& reference, double w = 0) {
  return ScoreTextAnswer(TextReward::kGsm8k, response, reference, w);
}
double Math(const std::string& response, const std::string& reference, double w = 0) {
  return ScoreTextAnswer(TextReward::kMath, response, reference, w);
}

TEST(TextReward, NamesParse) {
  EXPECT_EQ(ParseTextReward("gsm8k"), TextReward::kGsm8k);
  EXPECT_EQ(ParseTextReward("math"), TextReward::kMath);
  EXPECT_EQ(ParseTextReward("exact"), TextReward::kExact);
  EXPECT_FALSE(ParseTextReward("bleu").has_value());
}

TEST(TextReward, Gsm8kReadsTheReferenceAfterHashesAndTheLastNumberOfTheResponse) {
  const std::string reference = "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n#### 72";
  EXPECT_EQ(Gsm8k("She sold 48 + 24 = 72 clips.", reference), 1.0);
  EXPECT_EQ(Gsm8k("72 is wrong, the answer is 71", reference), 0.0) << "the last number counts";
  EXPECT_EQ(Gsm8k("The answer is \\boxed{72}. Check: 48 + 24", reference), 1.0) << "a box wins over the last number";
  EXPECT_EQ(Gsm8k("I do not know.", reference), 0.0) << "no answer at all";
}

TEST(TextReward, Gsm8kIgnoresCommasUnitsSignsAndTrailingZeros) {
  EXPECT_EQ(Gsm8k("It costs $1,000.", "#### 1000"), 1.0);
  EXPECT_EQ(Gsm8k("The total is 1000 dollars", "#### 1,000"), 1.0);
  EXPECT_EQ(Gsm8k("temperature drops to -5 degrees", "#### -5"), 1.0);
  EXPECT_EQ(Gsm8k("temperature drops to 5 degrees", "#### -5"), 0.0) << "the sign matters";
  EXPECT_EQ(Gsm8k("half: 0.50", "#### .5"), 1.0);
  EXPECT_EQ(Gsm8k("7.0 apples", "#### 7"), 1.0);
  EXPECT_EQ(Gsm8k("25%", "#### 25"), 1.0);
  EXPECT_EQ(Gsm8k("1,234,567 grains", "#### 1234567"), 1.0);
}

TEST(TextReward, NumbersAreCanonical) {
  EXPECT_EQ(CanonicalNumber("-0012.50"), "-12.5");
  EXPECT_EQ(CanonicalNumber(".5"), "0.5");
  EXPECT_EQ(CanonicalNumber("+3"), "3");
  EXPECT_EQ(CanonicalNumber("-0.0"), "0");
  EXPECT_EQ(CanonicalNumber("$1,000"), "1000");
  EXPECT_FALSE(CanonicalNumber("x+1").has_value());
  EXPECT_EQ(LastNumber("from 3 to -4.25, then 1,000"), "1,000");
  EXPECT_EQ(LastNumber("no digits"), std::nullopt);
}

TEST(TextReward, MathComparesBoxedAnswersAfterNormalising) {
  const std::string reference = "so the probability is $\\boxed{\\frac{1}{2}}$.";
  EXPECT_EQ(Math("The answer is \\boxed{1/2}", reference), 1.0);
  EXPECT_EQ(Math("The answer is \\boxed{\\dfrac{1}{2}}", reference), 1.0);
  EXPECT_EQ(Math("The answer is \\boxed{0.5}", reference), 1.0);
  EXPECT_EQ(Math("The answer is \\boxed{.50}", reference), 1.0);
  EXPECT_EQ(Math("The answer is \\boxed{\\frac{2}{3}}", reference), 0.0);
  EXPECT_EQ(Math("The answer is 1/2", reference), 0.0) << "math answers must be boxed";
  EXPECT_EQ(Math("\\boxed{\\left( 3, -1 \\right)}", "\\boxed{(3,-1)}"), 1.0);
  EXPECT_EQ(Math("\\boxed{x^{2} + 1}", "\\boxed{x^{2}+1}"), 1.0);
  EXPECT_EQ(Math("\\boxed{\\frac{\\sqrt{3}}{2}}", "\\boxed{\\frac{\\sqrt{3}}{2}}"), 1.0);
  EXPECT_EQ(Math("\\boxed{90^\\circ}", "\\boxed{90}"), 1.0);
  EXPECT_EQ(Math("\\boxed{10.0}", "10"), 1.0) << "a reference without a box is the answer itself";
  EXPECT_EQ(Math("\\boxed{-\\frac{3}{4}}", "\\boxed{-0.75}"), 1.0) << "a negative fraction equals its decimal";
  EXPECT_EQ(Math("\\boxed{\\frac{1}{3}}", "\\boxed{0.333}"), 0.0) << "a rounded decimal is not the fraction";
}

TEST(TextReward, NestedBracesInTheBoxAreKept) {
  EXPECT_EQ(LastBoxed("first \\boxed{1} then \\boxed{\\frac{a}{b+{c}}} end"), "\\frac{a}{b+{c}}");
  EXPECT_EQ(LastBoxed("\\boxed{unclosed"), std::nullopt);
}

TEST(TextReward, ExactComparesTrimmedText) {
  EXPECT_EQ(ScoreTextAnswer(TextReward::kExact, "  Paris\n", "Paris"), 1.0);
  EXPECT_EQ(ScoreTextAnswer(TextReward::kExact, "paris", "Paris"), 0.0);
  EXPECT_EQ(ScoreTextAnswer(TextReward::kExact, "   ", "Paris"), 0.0);
}

TEST(TextReward, FormatWeightRewardsAStatedAnswerEvenWhenWrong) {
  EXPECT_DOUBLE_EQ(Math("\\boxed{3}", "\\boxed{4}", 0.1), 0.1);
  EXPECT_DOUBLE_EQ(Math("\\boxed{4}", "\\boxed{4}", 0.1), 1.0);
  EXPECT_DOUBLE_EQ(Math("four", "\\boxed{4}", 0.1), 0.0);
  EXPECT_DOUBLE_EQ(Gsm8k("I give up", "#### 4", 0.2), 0.0);
  EXPECT_DOUBLE_EQ(Gsm8k("3", "#### 4", 0.2), 0.2);
}

}  // namespace
}  // namespace headroom::worker
