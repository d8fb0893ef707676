#include "core/spec/text_task_names.h"

#include "core/spec/enum_names.h"

namespace headroom::spec {
namespace {

#define HEADROOM_PROMPT_FORMAT_NAME(enumerator, name) {PromptFormatKind::enumerator, name},
constexpr EnumName<PromptFormatKind> kPromptFormats[] = {HEADROOM_PROMPT_FORMATS(HEADROOM_PROMPT_FORMAT_NAME)};
#undef HEADROOM_PROMPT_FORMAT_NAME

#define HEADROOM_TEXT_REWARD_NAME(enumerator, name) {TextReward::enumerator, name},
constexpr EnumName<TextReward> kTextRewards[] = {HEADROOM_TEXT_REWARDS(HEADROOM_TEXT_REWARD_NAME)};
#undef HEADROOM_TEXT_REWARD_NAME

template <typename Enum, std::size_t N>
std::vector<std::string> NamesOf(const EnumName<Enum> (&table)[N]) {
  std::vector<std::string> names;
  for (const EnumName<Enum>& entry : table) names.emplace_back(entry.name);
  return names;
}

}  // namespace

std::vector<std::string> PromptFormatNames() { return NamesOf(kPromptFormats); }

std::vector<std::string> TextRewardNames() { return NamesOf(kTextRewards); }

std::optional<PromptFormatKind> PromptFormatNamed(const std::string& name) { return ValueOf(kPromptFormats, name); }

std::optional<TextReward> TextRewardNamed(const std::string& name) { return ValueOf(kTextRewards, name); }

}  // namespace headroom::spec
