#include "core/spec/prompt_template.h"

#include <stdexcept>
#include <string_view>

namespace headroom::spec {
namespace {

// Walks the template once; calls emit for each piece of output text. Returns the
// problem, or "" when the template is usable.
template <typename Emit>
std::string Walk(const std::string& text, Emit&& emit) {
  bool has_prompt = false;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '{' && i + 1 < text.size() && text[i + 1] == '{') {
      emit(std::string_view("{"), -1);
      i += 2;
    } else if (c == '}' && i + 1 < text.size() && text[i + 1] == '}') {
      emit(std::string_view("}"), -1);
      i += 2;
    } else if (c == '{') {
      const size_t close = text.find('}', i + 1);
      const std::string where = " at character " + std::to_string(i + 1);
      if (close == std::string::npos) {
        return "unclosed \"{\"" + where + " (write {{ for a literal brace)";
      }
      const std::string name = text.substr(i + 1, close - i - 1);
      if (name == "system") {
        emit(std::string_view(), 0);
      } else if (name == "prompt") {
        emit(std::string_view(), 1);
        has_prompt = true;
      } else {
        return "unknown placeholder {" + name + "}" + where +
               "; expected {system} or {prompt} (write {{ and }} for literal braces)";
      }
      i = close + 1;
    } else if (c == '}') {
      return "single \"}\" at character " + std::to_string(i + 1) + " (write }} for a literal brace)";
    } else {
      const size_t next = text.find_first_of("{}", i);
      const size_t end = next == std::string::npos ? text.size() : next;
      emit(std::string_view(text).substr(i, end - i), -1);
      i = end;
    }
  }
  if (!has_prompt) return "must contain {prompt} (where the problem goes)";
  return "";
}

}  // namespace

std::string CheckPromptTemplate(const std::string& text) {
  return Walk(text, [](std::string_view, int) {});
}

std::string ExpandPromptTemplate(const std::string& text, const std::string& system, const std::string& prompt) {
  std::string out;
  const std::string problem = Walk(text, [&](std::string_view literal, int placeholder) {
    if (placeholder == 0) {
      out += system;
    } else if (placeholder == 1) {
      out += prompt;
    } else {
      out += literal;
    }
  });
  if (!problem.empty()) throw std::invalid_argument("prompt template: " + problem);
  return out;
}

}  // namespace headroom::spec
