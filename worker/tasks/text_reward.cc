#include "worker/tasks/text_reward.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/base/trim.h"
#include "core/spec/text_task_names.h"

namespace headroom::worker {
namespace {

void ReplaceAll(std::string& s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// The brace group starting at s[open] == '{': its content, and where it ends.
std::optional<std::pair<std::string, size_t>> BraceGroup(const std::string& s, size_t open) {
  if (open >= s.size() || s[open] != '{') return std::nullopt;
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '{') ++depth;
    if (s[i] == '}' && --depth == 0) return std::make_pair(s.substr(open + 1, i - open - 1), i + 1);
  }
  return std::nullopt;
}

// \frac{a}{b} -> (a)/(b) with a, b rewritten recursively; plain tokens keep no parentheses.
std::string RewriteFractions(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 5, "\\frac") == 0) {
      auto num = BraceGroup(s, i + 5);
      auto den = num ? BraceGroup(s, num->second) : std::nullopt;
      if (num && den) {
        const std::string a = RewriteFractions(num->first), b = RewriteFractions(den->first);
        auto wrap = [](const std::string& x) {
          for (char c : x)
            if (!IsDigit(c) && c != '.' && !std::isalpha(static_cast<unsigned char>(c))) return "(" + x + ")";
          return x;
        };
        out += wrap(a) + "/" + wrap(b);
        i = den->second;
        continue;
      }
    }
    out += s[i++];
  }
  return out;
}

}  // namespace

std::optional<TextReward> ParseTextReward(const std::string& name) { return spec::TextRewardNamed(name); }

std::optional<std::string> LastBoxed(const std::string& text) {
  for (const std::string& tag : {std::string("\\boxed"), std::string("\\fbox")}) {
    const size_t at = text.rfind(tag);
    if (at == std::string::npos) continue;
    size_t open = at + tag.size();
    while (open < text.size() && text[open] == ' ') ++open;
    if (auto group = BraceGroup(text, open)) return Trim(group->first);
  }
  return std::nullopt;
}

std::optional<std::string> LastNumber(const std::string& text) {
  // Scan for maximal runs of [-]digits[,digits...][.digits] or [-].digits; keep the last.
  std::optional<std::string> last;
  for (size_t i = 0; i < text.size();) {
    const bool starts = IsDigit(text[i]) || (text[i] == '.' && i + 1 < text.size() && IsDigit(text[i + 1]));
    if (!starts) {
      ++i;
      continue;
    }
    size_t b = i;
    if (b > 0 && text[b - 1] == '-') --b;
    size_t e = i;
    bool seen_point = false;
    while (e < text.size()) {
      const char c = text[e];
      if (IsDigit(c)) {
        ++e;
      } else if (c == ',' && !seen_point && e + 3 < text.size() + 1 && e + 1 < text.size() && IsDigit(text[e + 1])) {
        ++e;  // thousands separator
      } else if (c == '.' && !seen_point && e + 1 < text.size() && IsDigit(text[e + 1])) {
        seen_point = true;
        ++e;
      } else {
        break;
      }
    }
    last = text.substr(b, e - b);
    i = e;
  }
  return last;
}

std::optional<std::string> CanonicalNumber(const std::string& text) {
  std::string s;
  for (char c : text)
    if (c != ',' && c != '$' && c != '%' && c != ' ') s += c;
  if (s.rfind("\\$", 0) == 0) s = s.substr(2);
  ReplaceAll(s, "\\%", "");
  if (s.empty()) return std::nullopt;
  bool negative = false;
  size_t i = 0;
  if (s[0] == '-' || s[0] == '+') {
    negative = s[0] == '-';
    i = 1;
  }
  std::string whole, fraction;
  bool point = false;
  for (; i < s.size(); ++i) {
    if (IsDigit(s[i])) {
      (point ? fraction : whole) += s[i];
    } else if (s[i] == '.' && !point) {
      point = true;
    } else {
      return std::nullopt;
    }
  }
  if (whole.empty() && fraction.empty()) return std::nullopt;
  while (whole.size() > 1 && whole[0] == '0') whole.erase(0, 1);
  if (whole.empty()) whole = "0";
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  std::string out = whole + (fraction.empty() ? "" : "." + fraction);
  if (negative && out != "0") out = "-" + out;
  return out;
}

std::string NormaliseMathAnswer(const std::string& answer) {
  std::string s = answer;
  for (const char* noise : {"\\left", "\\right", "\\!", "\\,", "\\;", "\\ ", "$", "^\\circ", "^{\\circ}"}) {
    ReplaceAll(s, noise, "");
  }
  ReplaceAll(s, "\\dfrac", "\\frac");
  ReplaceAll(s, "\\tfrac", "\\frac");
  std::string compact;
  for (char c : s)
    if (!std::isspace(static_cast<unsigned char>(c))) compact += c;
  compact = RewriteFractions(compact);
  if (auto n = CanonicalNumber(compact)) return *n;
  // A fraction of two numbers: its exact decimal when it has one, else reduced a/b.
  const size_t slash = compact.find('/');
  if (slash != std::string::npos && compact.find('/', slash + 1) == std::string::npos) {
    std::string a = compact.substr(0, slash), b = compact.substr(slash + 1);
    auto strip = [](std::string x) {
      if (x.size() >= 2 && x.front() == '(' && x.back() == ')') x = x.substr(1, x.size() - 2);
      return x;
    };
    auto na = CanonicalNumber(strip(a)), nb = CanonicalNumber(strip(b));
    if (na && nb && std::atof(nb->c_str()) != 0) {
      const double value = std::atof(na->c_str()) / std::atof(nb->c_str());
      // Exact in a few decimals (1/2, 3/8, 7/4): the same normal form as the decimal.
      for (int digits = 0; digits <= 6; ++digits) {
        const double scaled = value * std::pow(10.0, digits);
        if (std::fabs(scaled - std::round(scaled)) < 1e-9) {
          char buffer[64];
          std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
          if (auto n = CanonicalNumber(buffer)) return *n;
        }
      }
      return *na + "/" + *nb;
    }
  }
  return compact;
}

std::optional<std::string> ExtractAnswer(TextReward kind, const std::string& response) {
  switch (kind) {
    case TextReward::kGsm8k: {
      if (auto boxed = LastBoxed(response)) {
        if (auto n = LastNumber(*boxed)) return CanonicalNumber(*n);
        return std::nullopt;
      }
      if (auto n = LastNumber(response)) return CanonicalNumber(*n);
      return std::nullopt;
    }
    case TextReward::kMath: {
      if (auto boxed = LastBoxed(response)) return NormaliseMathAnswer(*boxed);
      return std::nullopt;
    }
    case TextReward::kExact: {
      const std::string t = Trim(response);
      if (t.empty()) return std::nullopt;
      return t;
    }
  }
  return std::nullopt;
}

double ScoreTextAnswer(TextReward kind, const std::string& response, const std::string& reference,
                       double format_weight) {
  const std::optional<std::string> answer = ExtractAnswer(kind, response);
  std::optional<std::string> expected;
  switch (kind) {
    case TextReward::kGsm8k: {
      const size_t hashes = reference.rfind("####");
      const std::string tail = hashes == std::string::npos ? reference : reference.substr(hashes + 4);
      if (auto n = LastNumber(tail)) expected = CanonicalNumber(*n);
      break;
    }
    case TextReward::kMath: expected = NormaliseMathAnswer(LastBoxed(reference).value_or(reference)); break;
    case TextReward::kExact: expected = Trim(reference); break;
  }
  const double correct = answer && expected && *answer == *expected ? 1.0 : 0.0;
  const double formatted = answer ? 1.0 : 0.0;
  return (1.0 - format_weight) * correct + format_weight * formatted;
}

}  // namespace headroom::worker
