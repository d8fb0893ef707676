#include "tests/operator/testserver/label_selector.h"

#include <stdexcept>

#include "core/base/trim.h"

namespace headroom::testserver {
namespace {

// Splits on commas that are not inside parentheses.
std::vector<std::string> SplitTerms(const std::string& text) {
  std::vector<std::string> out;
  int depth = 0;
  std::string current;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(Trim(current));
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  if (!Trim(current).empty() || !out.empty()) out.push_back(Trim(current));
  return out;
}

std::vector<std::string> ParseSet(const std::string& text, const std::string& term) {
  std::string t = Trim(text);
  if (t.size() < 2 || t.front() != '(' || t.back() != ')') {
    throw std::invalid_argument("label selector term \"" + term + "\": expected a (value, ...) set");
  }
  std::vector<std::string> values;
  std::string inner = t.substr(1, t.size() - 2);
  size_t start = 0;
  while (true) {
    size_t comma = inner.find(',', start);
    std::string v = Trim(inner.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!v.empty()) values.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (values.empty()) throw std::invalid_argument("label selector term \"" + term + "\": empty value set");
  return values;
}

const nlohmann::json* Labels(const nlohmann::json& object) {
  if (!object.contains("metadata")) return nullptr;
  const auto& meta = object["metadata"];
  if (!meta.contains("labels") || !meta["labels"].is_object()) return nullptr;
  return &meta["labels"];
}

}  // namespace

LabelSelector LabelSelector::Parse(const std::string& text) {
  LabelSelector selector;
  if (Trim(text).empty()) return selector;
  for (const std::string& term : SplitTerms(text)) {
    if (term.empty()) throw std::invalid_argument("label selector \"" + text + "\": empty term");
    Term t;
    size_t pos;
    if (term[0] == '!') {
      t.key = Trim(term.substr(1));
      t.op = Op::kNotExists;
    } else if ((pos = term.find(" notin ")) != std::string::npos) {
      t.key = Trim(term.substr(0, pos));
      t.op = Op::kNotIn;
      t.values = ParseSet(term.substr(pos + 7), term);
    } else if ((pos = term.find(" in ")) != std::string::npos) {
      t.key = Trim(term.substr(0, pos));
      t.op = Op::kIn;
      t.values = ParseSet(term.substr(pos + 4), term);
    } else if ((pos = term.find("!=")) != std::string::npos) {
      t.key = Trim(term.substr(0, pos));
      t.op = Op::kNotEq;
      t.values = {Trim(term.substr(pos + 2))};
    } else if ((pos = term.find("==")) != std::string::npos) {
      t.key = Trim(term.substr(0, pos));
      t.op = Op::kEq;
      t.values = {Trim(term.substr(pos + 2))};
    } else if ((pos = term.find('=')) != std::string::npos) {
      t.key = Trim(term.substr(0, pos));
      t.op = Op::kEq;
      t.values = {Trim(term.substr(pos + 1))};
    } else {
      t.key = term;
      t.op = Op::kExists;
    }
    if (t.key.empty() || t.key.find_first_of(" ()=!") != std::string::npos) {
      throw std::invalid_argument("label selector term \"" + term + "\": bad key");
    }
    selector.terms_.push_back(std::move(t));
  }
  return selector;
}

bool LabelSelector::Matches(const nlohmann::json& object) const {
  const nlohmann::json* labels = Labels(object);
  for (const Term& t : terms_) {
    bool has = labels && labels->contains(t.key) && (*labels)[t.key].is_string();
    std::string value = has ? (*labels)[t.key].get<std::string>() : "";
    auto in_values = [&] {
      for (const auto& v : t.values) {
        if (v == value) return true;
      }
      return false;
    };
    switch (t.op) {
      case Op::kExists:
        if (!has) return false;
        break;
      case Op::kNotExists:
        if (has) return false;
        break;
      case Op::kEq:
        if (!has || value != t.values[0]) return false;
        break;
      case Op::kNotEq:
        if (has && value == t.values[0]) return false;
        break;
      case Op::kIn:
        if (!has || !in_values()) return false;
        break;
      case Op::kNotIn:
        if (has && in_values()) return false;
        break;
    }
  }
  return true;
}

FieldSelector FieldSelector::Parse(const std::string& text) {
  FieldSelector selector;
  if (Trim(text).empty()) return selector;
  for (const std::string& term : SplitTerms(text)) {
    Term t;
    size_t pos;
    if ((pos = term.find("!=")) != std::string::npos) {
      t.path = Trim(term.substr(0, pos));
      t.equal = false;
      t.value = Trim(term.substr(pos + 2));
    } else if ((pos = term.find("==")) != std::string::npos) {
      t.path = Trim(term.substr(0, pos));
      t.equal = true;
      t.value = Trim(term.substr(pos + 2));
    } else if ((pos = term.find('=')) != std::string::npos) {
      t.path = Trim(term.substr(0, pos));
      t.equal = true;
      t.value = Trim(term.substr(pos + 1));
    } else {
      throw std::invalid_argument("field selector term \"" + term + "\": expected path=value or path!=value");
    }
    if (t.path.empty()) throw std::invalid_argument("field selector term \"" + term + "\": empty path");
    selector.terms_.push_back(std::move(t));
  }
  return selector;
}

bool FieldSelector::Matches(const nlohmann::json& object) const {
  for (const Term& t : terms_) {
    const nlohmann::json* node = &object;
    size_t start = 0;
    while (node && start <= t.path.size()) {
      size_t dot = t.path.find('.', start);
      std::string part = t.path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      node = node->is_object() && node->contains(part) ? &(*node)[part] : nullptr;
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    std::string value =
        node && node->is_string() ? node->get<std::string>() : (node && !node->is_null() ? node->dump() : "");
    if ((value == t.value) != t.equal) return false;
  }
  return true;
}

}  // namespace headroom::testserver
