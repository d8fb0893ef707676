// LabelSelector and FieldSelector: the query filters of a list or watch, parsed from
// their string form as the API server accepts them.
//   labels: "a=b", "a==b", "a!=b", "a in (x,y)", "a notin (x)", "a", "!a", comma-joined (AND)
//   fields: "metadata.name=x", "spec.nodeName!=y", any dotted path into the object
// A malformed selector throws std::invalid_argument naming the offending term (the test
// server answers 400 BadRequest with it).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace headroom::testserver {

class LabelSelector {
 public:
  LabelSelector() = default;  // matches everything
  static LabelSelector Parse(const std::string& text);
  bool Matches(const nlohmann::json& object) const;
  bool empty() const { return terms_.empty(); }

 private:
  enum class Op { kEq, kNotEq, kIn, kNotIn, kExists, kNotExists };
  struct Term {
    std::string key;
    Op op;
    std::vector<std::string> values;
  };
  std::vector<Term> terms_;
};

class FieldSelector {
 public:
  FieldSelector() = default;
  static FieldSelector Parse(const std::string& text);
  bool Matches(const nlohmann::json& object) const;

 private:
  struct Term {
    std::string path;
    bool equal;
    std::string value;
  };
  std::vector<Term> terms_;
};

}  // namespace headroom::testserver
