// Rewards for text answers, as GRPO recipes for GSM8K and MATH score them (verl's
// gsm8k/math reward functions, simpleRL-reason): the model's final answer is extracted
// from its response and compared with the reference after normalisation.
//
//   gsm8k  reference: the text after "####" (GSM8K's answer field). Model answer: the
//          content of the last \boxed{...} if there is one, else the last number in the
//          response. Both compared as numbers: commas, "$", "%", units after the number
//          and trailing zeros do not matter (1,000 = 1000, 0.50 = .5, 7 = 7.0).
//   math   reference and model answer: the content of the last \boxed{...} (the whole
//          reference when it has none). Compared after removing spaces, \left/\right,
//          \! \, and $; \dfrac and \tfrac read as \frac; \frac{a}{b}, a/b and their
//          decimal value are the same number (\frac{1}{2} = 1/2 = 0.5).
//   exact  the response, trimmed, equals the reference, trimmed.
// No answer at all (nothing to extract) scores 0. With a format weight w in [0, 1] the
// reward is (1 - w) * correct + w * has_answer: a response that states an answer in the
// expected form earns w even when it is wrong.
#pragma once

#include <optional>
#include <string>

#include "core/spec/text_task_names.h"

namespace headroom::worker {

// gsm8k, math, exact: core/spec's one list of the rewards a spec may name.
using spec::TextReward;

// The reward named `name` (spec.task.reward.name); nullopt for anything else.
std::optional<TextReward> ParseTextReward(const std::string& name);

// The content of the last \boxed{...} (nested braces kept), or nullopt.
std::optional<std::string> LastBoxed(const std::string& text);
// The last number written in text ("-1,234.50", ".5"), as written, or nullopt.
std::optional<std::string> LastNumber(const std::string& text);
// A number's canonical form: no commas, sign only when negative, no trailing zeros after
// the point, no point when whole ("-0012.50" -> "-12.5", ".5" -> "0.5"); nullopt when
// the text (after "$", "%" and surrounding spaces are dropped) is not a number.
std::optional<std::string> CanonicalNumber(const std::string& text);
// A math answer's normal form (see above); numbers and simple fractions become their
// canonical decimal when it is exact, so equal values compare equal.
std::string NormaliseMathAnswer(const std::string& answer);

// The answer the response states, as the reward reads it; nullopt when it states none.
std::optional<std::string> ExtractAnswer(TextReward kind, const std::string& response);
// 1 when the response's answer matches the reference, else 0; with format_weight as above.
double ScoreTextAnswer(TextReward kind, const std::string& response, const std::string& reference,
                       double format_weight = 0.0);

}  // namespace headroom::worker
