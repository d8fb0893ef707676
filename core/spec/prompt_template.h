// spec.task.prompt.template: a prompt written out in full, with placeholders.
//
// Python str.format's rules, reduced to two names: "{system}" and "{prompt}" are
// replaced by the system message and the problem's prompt; "{{" and "}}" stand for
// literal "{" and "}". Any other "{" or "}" is an error (a template holding LaTeX or JSON
// doubles its braces). The template must contain {prompt}: without it every problem
// would get the same text.
#pragma once

#include <string>

namespace headroom::spec {

// "" when the template is usable, else what is wrong with it, e.g.
// "unknown placeholder {question} at character 12; expected {system} or {prompt}
// (write {{ and }} for literal braces)".
std::string CheckPromptTemplate(const std::string& text);

// The template with its placeholders replaced. Throws std::invalid_argument with
// CheckPromptTemplate's message for a template it refuses.
std::string ExpandPromptTemplate(const std::string& text, const std::string& system, const std::string& prompt);

}  // namespace headroom::spec
