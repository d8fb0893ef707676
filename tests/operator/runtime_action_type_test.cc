// Action types travel as names (status.lastAction.type, the --summary JSON, Event names):
// every type has exactly one, it reads back, and the guard's actions keep the guard's
// (the spec's) spellings.
#include "operator/runtime/action_type.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <string>

namespace headroom::runtime {
namespace {

constexpr ActionType kAll[] = {
    ActionType::kRestart,
    ActionType::kReshard,
    ActionType::kShrinkMicroBatch,
    ActionType::kShrinkTokenBudget,
    ActionType::kEnableActivationCheckpointing,
    ActionType::kDisableOffload,
    ActionType::kEnableOffload,
    ActionType::kRestartAfterOOMKill,
    ActionType::kRestartAfterGpuOOM,
    ActionType::kRestartAfterCrash,
    ActionType::kResume,
    ActionType::kResumeAfterDisruption,
    ActionType::kSuspend,
    ActionType::kUnsuspend,
    ActionType::kScale,
    ActionType::kFail,
};

TEST(ActionType, TheListHereIsEveryType) {
  EXPECT_EQ(std::size(kAll), static_cast<size_t>(ActionType::kFail) + 1) << "a new type: add it to kAll";
}

// The CRD's description of status.lastAction.type (core/spec/crd_overlay.cc, which cannot
// depend on the runtime) names exactly the wire names.
TEST(ActionType, TheCrdDescriptionNamesEveryWireName) {
  const std::filesystem::path crd = std::filesystem::path(HEADROOM_SOURCE_DIR) / "crds/headroom.dev_trainingjobs.yaml";
  std::ifstream in(crd);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string lead = "action_type.h wire name - ";
  const size_t at = text.find(lead);
  ASSERT_NE(at, std::string::npos) << crd;
  const std::string list = text.substr(at + lead.size(), text.find('\n', at) - at - lead.size());
  std::set<std::string> described;
  const std::regex word("[A-Za-z]+");
  for (auto it = std::sregex_iterator(list.begin(), list.end(), word); it != std::sregex_iterator(); ++it) {
    if (it->str() != "or") described.insert(it->str());
  }
  std::set<std::string> names;
  for (ActionType t : kAll) names.insert(ToWireName(t));
  EXPECT_EQ(described, names) << list;
}

TEST(ActionType, EveryTypeHasOneWireNameThatReadsBack) {
  std::set<std::string> seen;
  for (ActionType t : kAll) {
    const std::string name = ToWireName(t);
    EXPECT_NE(name, "unknown");
    EXPECT_TRUE(seen.insert(name).second) << "two types share " << name;
    ASSERT_TRUE(FromWireName(name).has_value()) << name;
    EXPECT_EQ(*FromWireName(name), t) << name;
  }
  EXPECT_FALSE(FromWireName("Restart").has_value()) << "names are case-sensitive";
  EXPECT_FALSE(FromWireName("").has_value());
  EXPECT_FALSE(FromWireName("none").has_value()) << "doing nothing is no action";
}

TEST(ActionType, GuardDecisionsKeepTheGuardsNames) {
  using guard::DecisionAction;
  for (DecisionAction a : {DecisionAction::kRestart, DecisionAction::kReshard, DecisionAction::kShrinkMicroBatch,
                           DecisionAction::kShrinkTokenBudget, DecisionAction::kEnableActivationCheckpointing,
                           DecisionAction::kDisableOffload, DecisionAction::kEnableOffload, DecisionAction::kFail}) {
    EXPECT_STREQ(ToWireName(FromDecision(a)), guard::DecisionActionName(a));
  }
  EXPECT_EQ(FromDecision(DecisionAction::kNone), ActionType::kRestart)
      << "a guard stop with nothing to change restarts";
}

TEST(ActionType, OnlyCrashesAndOutOfMemoryEndsAreUnplanned) {
  std::set<ActionType> unplanned;
  for (ActionType t : kAll) {
    if (IsUnplannedEnd(t)) unplanned.insert(t);
  }
  EXPECT_EQ(unplanned, (std::set<ActionType>{ActionType::kRestartAfterOOMKill, ActionType::kRestartAfterGpuOOM,
                                             ActionType::kRestartAfterCrash}));
}

}  // namespace
}  // namespace headroom::runtime
