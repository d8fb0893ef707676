// Token shapes of the worker's verifiable tasks, so the spec can check that
// maxPromptLength and maxResponseLength fit them before any worker starts.
//
// A, B and D are `digits`-long digit strings, zero-padded; one token per character
// (kVocabSize in model_presets.h). A prompt is BOS + its characters; an answer is its
// characters + EOS.
//   addition  prompt "A+B="  answer A+B, zero-padded to digits+1 characters
//   reverse   prompt "D>"    answer D reversed (digits characters)
//   sort      prompt "D>"    answer D's digits sorted ascending (digits characters)
#pragma once

#include <string>
#include <vector>

namespace headroom::spec {

// "addition", "reverse", "sort".
std::vector<std::string> TaskNames();
bool IsKnownTask(const std::string& name);

// Tokens of every prompt of task `name` with `digits` digits, BOS included.
// Only meaningful for a known task and digits >= 1; returns 0 otherwise.
int PromptTokens(const std::string& name, int digits);
// The most tokens a correct answer takes, EOS included; 0 for an unknown task.
int MaxAnswerTokens(const std::string& name, int digits);
// The prompt's shape for messages, e.g. "BOS + \"123+456=\"".
std::string PromptExample(const std::string& name, int digits);

}  // namespace headroom::spec
