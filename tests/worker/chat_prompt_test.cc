// RenderPrompt against transformers' own apply_chat_template output for the Qwen3 and
// Llama 3 templates (tests/worker/fixtures/chat/expected_chat.jsonl, made by
// make_expected_chat.py beside it), and the template form's rules.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/spec/text_task_names.h"
#include "worker/tasks/chat_prompt.h"

namespace headroom::worker {
namespace {

const std::string kFixture = std::string(HEADROOM_SOURCE_DIR) + "/tests/worker/fixtures/chat/expected_chat.jsonl";

// Which prompt format renders each fixture family, and its tokenizer's bos_token text.
struct Family {
  PromptFormatKind kind;
  std::string bos_text;
};
Family FamilyOf(const std::string& family) {
  if (family == "qwen3") return {PromptFormatKind::kChatml, ""};
  if (family == "tiny") return {PromptFormatKind::kChatml, ""};  // configs/models/qwen2-tiny-addition
  if (family == "llama3") return {PromptFormatKind::kLlama3, "<|begin_of_text|>"};
  throw std::runtime_error("fixture family \"" + family + "\" has no prompt format here");
}

TEST(ChatPrompt, MatchesTransformersApplyChatTemplate) {
  std::ifstream in(kFixture);
  ASSERT_TRUE(in) << "cannot read " << kFixture;
  std::string line;
  int checked = 0;
  std::set<std::string> families;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    const nlohmann::json c = nlohmann::json::parse(line);
    const Family family = FamilyOf(c.at("family").get<std::string>());
    PromptFormat format;
    format.kind = family.kind;
    format.system = c.at("system").get<std::string>();
    EXPECT_EQ(RenderPrompt(format, c.at("prompt").get<std::string>(), family.bos_text), c.at("text").get<std::string>())
        << kFixture << ":" << number << " (" << c.at("family") << ")";
    families.insert(c.at("family").get<std::string>());
    ++checked;
  }
  EXPECT_GE(checked, 10);
  EXPECT_TRUE(families.count("qwen3") && families.count("llama3")) << "the fixture lost a family";
}

TEST(ChatPrompt, ChatmlOmitsAnEmptySystemBlock) {
  PromptFormat format;  // chatml, no system
  EXPECT_EQ(RenderPrompt(format, "2+3?", "<bos>"), "<|im_start|>user\n2+3?<|im_end|>\n<|im_start|>assistant\n")
      << "chatml adds no bos text";
  format.system = "S";
  EXPECT_EQ(RenderPrompt(format, "2+3?", ""),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n2+3?<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatPrompt, Llama3TrimsAsJinjaDoes) {
  PromptFormat format{PromptFormatKind::kLlama3, "", ""};
  EXPECT_EQ(RenderPrompt(format, " \t2+3?\n", "<B>"), "<B><|start_header_id|>user<|end_header_id|>\n\n2+3?<|eot_id|>"
                                                      "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // An all-whitespace system message is still a (empty) system message: Jinja tests the
  // message list, not the trimmed content.
  format.system = "  ";
  EXPECT_EQ(RenderPrompt(format, "q", ""), "<|start_header_id|>system<|end_header_id|>\n\n<|eot_id|>"
                                           "<|start_header_id|>user<|end_header_id|>\n\nq<|eot_id|>"
                                           "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// Python's str.strip() removes exactly the characters str.isspace() accepts; the list in
// chat_prompt.h, byte for byte in UTF-8.
TEST(ChatPrompt, PythonStripMatchesIsspace) {
  const std::vector<std::string> spaces = {
      "\t",           "\n",           "\v",           "\f",           "\r",
      "\x1c",         "\x1d",         "\x1e",         "\x1f",         " ",
      "\xc2\x85",     "\xc2\xa0",     "\xe1\x9a\x80", "\xe2\x80\x80", "\xe2\x80\x8a",
      "\xe2\x80\xa8", "\xe2\x80\xa9", "\xe2\x80\xaf", "\xe2\x81\x9f", "\xe3\x80\x80"};
  for (const std::string& s : spaces) {
    EXPECT_EQ(PythonStrip(s + "x" + s + "y" + s), "x" + s + "y") << "U+ bytes " << nlohmann::json(s).dump();
  }
  // Not whitespace in Python: zero-width space U+200B, BOM U+FEFF, NEL's neighbours.
  for (const std::string& s : {std::string("\xe2\x80\x8b"), std::string("\xef\xbb\xbf"), std::string("\xc2\x84"),
                               std::string("\xc2\xa1"), std::string("\xe3\x80\x81")}) {
    EXPECT_EQ(PythonStrip(s + "x" + s), s + "x" + s) << nlohmann::json(s).dump();
  }
  EXPECT_EQ(PythonStrip(""), "");
  EXPECT_EQ(PythonStrip(" \xc2\xa0 "), "");
  EXPECT_EQ(PythonStrip("\xe4\xb8\xad\xe6\x96\x87 "), "\xe4\xb8\xad\xe6\x96\x87");  // CJK ends in 0x80-0xBF bytes
}

TEST(ChatPrompt, TemplateIsTheWholeText) {
  PromptFormat format{PromptFormatKind::kTemplate, "Be brief.", "{system}\nQ: {prompt}\nA (\\boxed{{}}):"};
  EXPECT_EQ(RenderPrompt(format, "2+3?", "<bos>"), "Be brief.\nQ: 2+3?\nA (\\boxed{}):");
  format.template_text = "Q: {question}";
  EXPECT_THROW(RenderPrompt(format, "2+3?", ""), std::invalid_argument);
}

TEST(ChatPrompt, FormatNames) {
  EXPECT_EQ(ParsePromptFormatKind("chatml"), PromptFormatKind::kChatml);
  EXPECT_EQ(ParsePromptFormatKind("llama3"), PromptFormatKind::kLlama3);
  EXPECT_EQ(ParsePromptFormatKind("template"), PromptFormatKind::kTemplate);
  EXPECT_FALSE(ParsePromptFormatKind("ChatML").has_value());
  for (const std::string& name : spec::PromptFormatNames()) EXPECT_TRUE(ParsePromptFormatKind(name)) << name;
}

}  // namespace
}  // namespace headroom::worker
