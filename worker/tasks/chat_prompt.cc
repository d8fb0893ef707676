#include "worker/tasks/chat_prompt.h"

#include <stdexcept>

#include "core/spec/prompt_template.h"
#include "core/spec/text_task_names.h"

namespace headroom::worker {
namespace {

// The length of the Python-whitespace character starting at text[i], or 0 when the
// character there is not whitespace (or not valid UTF-8, which Python would never see).
size_t WhitespaceAt(const std::string& text, size_t i) {
  const auto byte = [&](size_t k) { return k < text.size() ? static_cast<unsigned char>(text[k]) : 0u; };
  const unsigned c0 = byte(i);
  if ((c0 >= 0x09 && c0 <= 0x0D) || (c0 >= 0x1C && c0 <= 0x20)) return 1;
  if (c0 == 0xC2 && (byte(i + 1) == 0x85 || byte(i + 1) == 0xA0)) return 2;  // U+0085, U+00A0
  if (c0 == 0xE1 && byte(i + 1) == 0x9A && byte(i + 2) == 0x80) return 3;    // U+1680
  if (c0 == 0xE2 && byte(i + 1) == 0x80) {
    const unsigned c2 = byte(i + 2);
    // U+2000-U+200A, U+2028, U+2029, U+202F
    if ((c2 >= 0x80 && c2 <= 0x8A) || c2 == 0xA8 || c2 == 0xA9 || c2 == 0xAF) return 3;
  }
  if (c0 == 0xE2 && byte(i + 1) == 0x81 && byte(i + 2) == 0x9F) return 3;  // U+205F
  if (c0 == 0xE3 && byte(i + 1) == 0x80 && byte(i + 2) == 0x80) return 3;  // U+3000
  return 0;
}

// Where the UTF-8 character that ends at text[end - 1] starts.
size_t CharacterStart(const std::string& text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80 && end - start < 4) --start;
  return start;
}

}  // namespace

std::optional<PromptFormatKind> ParsePromptFormatKind(const std::string& name) { return spec::PromptFormatNamed(name); }

std::string PythonStrip(const std::string& text) {
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t n = WhitespaceAt(text, begin);
    if (n == 0) break;
    begin += n;
  }
  size_t end = text.size();
  while (end > begin) {
    const size_t start = CharacterStart(text, end);
    if (start < begin || WhitespaceAt(text, start) != end - start) break;
    end = start;
  }
  return text.substr(begin, end - begin);
}

std::string RenderPrompt(const PromptFormat& format, const std::string& user_prompt, const std::string& bos_text) {
  switch (format.kind) {
    case PromptFormatKind::kChatml: {
      std::string out;
      if (!format.system.empty()) out += "<|im_start|>system\n" + format.system + "<|im_end|>\n";
      out += "<|im_start|>user\n" + user_prompt + "<|im_end|>\n<|im_start|>assistant\n";
      return out;
    }
    case PromptFormatKind::kLlama3: {
      std::string out = bos_text;
      if (!format.system.empty()) {
        out += "<|start_header_id|>system<|end_header_id|>\n\n" + PythonStrip(format.system) + "<|eot_id|>";
      }
      out += "<|start_header_id|>user<|end_header_id|>\n\n" + PythonStrip(user_prompt) + "<|eot_id|>";
      out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return out;
    }
    case PromptFormatKind::kTemplate:
      return spec::ExpandPromptTemplate(format.template_text, format.system, user_prompt);
  }
  throw std::invalid_argument("RenderPrompt: unknown prompt format");
}

}  // namespace headroom::worker
