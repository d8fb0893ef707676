// The worker parses core/spec's lists of the prompt formats and rewards a text task
// accepts into its enums, by position: every listed name must parse, to a distinct value,
// and every enum value must be named.
#include <gtest/gtest.h>

#include <set>

#include "core/spec/text_task_names.h"
#include "worker/tasks/chat_prompt.h"
#include "worker/tasks/text_reward.h"

namespace headroom::worker {
namespace {

TEST(TextTaskNames, EveryPromptFormatNameParsesToItsOwnKind) {
  std::set<PromptFormatKind> named;
  for (const std::string& name : spec::PromptFormatNames()) {
    ASSERT_TRUE(ParsePromptFormatKind(name)) << name;
    named.insert(*ParsePromptFormatKind(name));
  }
  EXPECT_EQ(named, (std::set<PromptFormatKind>{PromptFormatKind::kChatml, PromptFormatKind::kLlama3,
                                               PromptFormatKind::kTemplate}));
  EXPECT_EQ(ParsePromptFormatKind("llama3"), PromptFormatKind::kLlama3);
  EXPECT_FALSE(ParsePromptFormatKind("alpaca"));
}

TEST(TextTaskNames, EveryRewardNameParsesToItsOwnReward) {
  std::set<TextReward> named;
  for (const std::string& name : spec::TextRewardNames()) {
    ASSERT_TRUE(ParseTextReward(name)) << name;
    named.insert(*ParseTextReward(name));
  }
  EXPECT_EQ(named, (std::set<TextReward>{TextReward::kGsm8k, TextReward::kMath, TextReward::kExact}));
  EXPECT_EQ(ParseTextReward("math"), TextReward::kMath);
  EXPECT_FALSE(ParseTextReward("bleu"));
}

}  // namespace
}  // namespace headroom::worker
