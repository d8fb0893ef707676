// core/spec keeps its own lists of the prompt formats and rewards a text task accepts
// (core links no worker code); they must be exactly what the worker implements.
#include <gtest/gtest.h>

#include "core/spec/text_task_names.h"
#include "worker/tasks/chat_prompt.h"
#include "worker/tasks/text_reward.h"

namespace headroom::worker {
namespace {

TEST(TextTaskNames, SpecPromptFormatsAreTheWorkers) {
  EXPECT_EQ(spec::PromptFormatNames(), PromptFormatKindNames());
  for (const std::string& name : spec::PromptFormatNames()) EXPECT_TRUE(ParsePromptFormatKind(name)) << name;
}

TEST(TextTaskNames, SpecRewardsAreTheWorkers) {
  for (const std::string& name : spec::TextRewardNames()) EXPECT_TRUE(ParseTextReward(name)) << name;
  // And nothing the worker accepts is missing from the spec's list: every enum value is named.
  std::set<TextReward> named;
  for (const std::string& name : spec::TextRewardNames()) named.insert(*ParseTextReward(name));
  EXPECT_EQ(named, (std::set<TextReward>{TextReward::kGsm8k, TextReward::kMath, TextReward::kExact}));
}

}  // namespace
}  // namespace headroom::worker
