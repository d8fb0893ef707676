// The text a chat model is prompted with: a system message (optional) and one user
// message, rendered as the model family's chat template renders them, with the
// assistant's turn opened so that generation continues as the assistant.
//
// Each form matches transformers' apply_chat_template(messages, tokenize=False,
// add_generation_prompt=True) with that family's template, byte for byte
// (tests/worker/chat_prompt_test.cc checks it against strings transformers produced):
//   chatml    Qwen3's template. With a system message:
//               "<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{prompt}<|im_end|>\n"
//               "<|im_start|>assistant\n"
//             with an empty system: no system block. Qwen2.5's template would instead
//             insert its default system prompt ("You are Qwen, created by Alibaba Cloud...");
//             a job that wants it sets it as spec.task.prompt.system, so the prompt is
//             what the spec says and never a template's hidden default.
//   llama3    Meta-Llama-3-8B-Instruct's template: bos_text, then
//               "<|start_header_id|>system<|end_header_id|>\n\n" trim(system) "<|eot_id|>"
//             (only when system is non-empty), then
//               "<|start_header_id|>user<|end_header_id|>\n\n" trim(prompt) "<|eot_id|>"
//               "<|start_header_id|>assistant<|end_header_id|>\n\n"
//             where trim strips leading and trailing whitespace as Jinja's trim (Python's
//             str.strip()) does, Unicode whitespace included.
//   template  template_text with {system} and {prompt} replaced, "{{" and "}}" written as
//             "{" and "}" (Python str.format's rules; see core/spec/prompt_template.h).
//             The template is the whole text: nothing, not even bos_text, is added.
// The text still goes through the tokenizer, which adds no special tokens of its own:
// "<|im_start|>" and the like are matched as the special tokens they name.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/spec/text_task_names.h"

namespace headroom::worker {

// chatml, llama3, template: core/spec's one list of the formats a spec may name.
using spec::PromptFormatKind;

// The kind named `name` (spec.task.prompt.format); nullopt for anything else.
std::optional<PromptFormatKind> ParsePromptFormatKind(const std::string& name);

struct PromptFormat {
  PromptFormatKind kind = PromptFormatKind::kChatml;
  std::string system;         // the system message; empty = none
  std::string template_text;  // the whole prompt with {system} and {prompt} (kTemplate only)
};

// The prompt text for user_prompt, as above. bos_text: the tokenizer's bos_token text
// (Llama 3 templates start with it); may be empty. Throws std::invalid_argument for a
// template that core/spec's CheckPromptTemplate refuses (the spec validator refuses it first).
std::string RenderPrompt(const PromptFormat& format, const std::string& user_prompt, const std::string& bos_text);

// Python's str.strip() on UTF-8 text: removes leading and trailing characters for which
// str.isspace() is true (ASCII \t\n\v\f\r, \x1c-\x1f, space, U+0085, U+00A0, U+1680,
// U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000).
std::string PythonStrip(const std::string& text);

}  // namespace headroom::worker
