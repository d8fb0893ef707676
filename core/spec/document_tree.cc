#include "core/spec/document_tree.h"

#include "core/base/utf8.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

namespace headroom::spec {
namespace {

using Kind = DocumentNode::Kind;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?  (YAML 1.2 core schema float)
bool IsCoreFloat(const std::string& s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  size_t int_digits = 0, frac_digits = 0;
  while (i < s.size() && IsDigit(s[i])) ++i, ++int_digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && IsDigit(s[i])) ++i, ++frac_digits;
    if (int_digits == 0 && frac_digits == 0) return false;
  } else if (int_digits == 0) {
    return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    size_t exp_digits = 0;
    while (i < s.size() && IsDigit(s[i])) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  return i == s.size();
}

double ParseDouble(std::string s) {
  if (!s.empty() && s[0] == '+') s.erase(0, 1);
  double value = 0;
  std::from_chars(s.data(), s.data() + s.size(), value);
  return value;
}

// Types a plain (unquoted, untagged) YAML scalar by the YAML 1.2 core schema.
DocumentNode ResolvePlainScalar(const std::string& value) {
  DocumentNode node;
  node.text = value;
  if (value.empty() || value == "~" || value == "null" || value == "Null" || value == "NULL") {
    node.kind = Kind::kNull;
    return node;
  }
  if (value == "true" || value == "True" || value == "TRUE" || value == "false" || value == "False" ||
      value == "FALSE") {
    node.kind = Kind::kBool;
    node.bool_value = value[0] == 't' || value[0] == 'T';
    return node;
  }
  // Integers: decimal with optional sign, 0x hex, 0o octal.
  int base = 10;
  std::string digits = value;
  bool negative = false;
  if (value.size() > 2 && value[0] == '0' && (value[1] == 'x' || value[1] == 'o')) {
    base = value[1] == 'x' ? 16 : 8;
    digits = value.substr(2);
  } else if (value[0] == '+' || value[0] == '-') {
    negative = value[0] == '-';
    digits = value.substr(1);
  }
  auto is_base_digit = [base](char c) {
    if (base == 8) return c >= '0' && c <= '7';
    if (base == 16) return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    return IsDigit(c);
  };
  if (!digits.empty() && std::all_of(digits.begin(), digits.end(), is_base_digit)) {
    node.kind = Kind::kInt;
    uint64_t magnitude = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude, base);
    const uint64_t limit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + (negative ? 1 : 0);
    node.int_fits = ec == std::errc() && magnitude <= limit;
    if (node.int_fits) {
      node.int_value = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
      node.float_value = static_cast<double>(node.int_value);
    } else {
      node.float_value = base == 10 ? ParseDouble(value) : std::numeric_limits<double>::infinity();
    }
    return node;
  }
  if (IsCoreFloat(value)) {
    node.kind = Kind::kFloat;
    node.float_value = ParseDouble(value);
    return node;
  }
  for (const char* inf : {".inf", ".Inf", ".INF"}) {
    for (const char* sign : {"", "+", "-"}) {
      if (value == std::string(sign) + inf) {
        node.kind = Kind::kFloat;
        node.float_value = (sign[0] == '-' ? -1 : 1) * std::numeric_limits<double>::infinity();
        return node;
      }
    }
  }
  if (value == ".nan" || value == ".NaN" || value == ".NAN") {
    node.kind = Kind::kFloat;
    node.float_value = std::numeric_limits<double>::quiet_NaN();
    return node;
  }
  node.kind = Kind::kString;
  return node;
}

// Thrown out of the event handler to stop loading; carries the reason.
struct LoadAbort {
  SpecError error;
};

int64_t CountNodes(const DocumentNode& node) {
  int64_t n = 1;
  for (const auto& m : node.members) n += CountNodes(m.value);
  for (const auto& i : node.items) n += CountNodes(i);
  return n;
}

// Builds DocumentNodes from yaml-cpp's parse events: one stack frame per open map or list.
class TreeBuilder : public YAML::EventHandler {
 public:
  explicit TreeBuilder(std::vector<SpecError>* errors) : errors_(errors) {}

  std::vector<DocumentNode>& documents() { return documents_; }

  void OnDocumentStart(const YAML::Mark&) override { anchors_.clear(); }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    DocumentNode node;
    SetMark(node, mark);
    Complete(std::move(node), anchor);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    if (anchor >= anchors_.size() || !anchors_[anchor].has_value()) {
      throw LoadAbort{
          {"", "malformed YAML: alias to an anchor that is not complete here", mark.line + 1, mark.column + 1}};
    }
    DocumentNode copy = *anchors_[anchor];
    Count(CountNodes(copy) - 1, mark);
    Complete(std::move(copy), 0);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    if (!utf8::IsValid(value)) {
      const bool is_key = !stack_.empty() && stack_.back().node.kind == Kind::kMap && !stack_.back().has_key;
      errors_->push_back({is_key ? ChildPath(stack_.back().path, value) : NextChildPath(), "not valid UTF-8",
                          mark.line + 1, mark.column + 1});
    }
    DocumentNode node;
    if (tag == "?" || (tag != "!" && tag != "tag:yaml.org,2002:str")) {
      node = ResolvePlainScalar(value);
    } else {
      node.kind = Kind::kString;
      node.text = value;
    }
    SetMark(node, mark);
    Complete(std::move(node), anchor);
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(Kind::kList, mark, anchor);
  }
  void OnSequenceEnd() override { Close(); }

  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(Kind::kMap, mark, anchor);
  }
  void OnMapEnd() override { Close(); }

 private:
  struct Frame {
    DocumentNode node;
    YAML::anchor_t anchor = 0;
    std::string path;
    bool has_key = false;
    std::string key;
    std::set<std::string> keys;
  };

  static void SetMark(DocumentNode& node, const YAML::Mark& mark) {
    if (mark.is_null()) return;
    node.line = mark.line + 1;
    node.column = mark.column + 1;
  }

  void Count(int64_t n, const YAML::Mark& mark) {
    nodes_ += n + 1;
    if (nodes_ > kMaxDocumentNodes) {
      throw LoadAbort{{"",
                       "document too large: more than " + std::to_string(kMaxDocumentNodes) +
                           " nodes (aliases count each time they are used)",
                       mark.line + 1, mark.column + 1}};
    }
  }

  std::string NextChildPath() const {
    if (stack_.empty()) return "";
    const Frame& top = stack_.back();
    if (top.node.kind == Kind::kList) return IndexPath(top.path, top.node.items.size());
    return top.has_key ? ChildPath(top.path, top.key) : top.path;
  }

  void Open(Kind kind, const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (static_cast<int>(stack_.size()) >= kMaxDocumentDepth) {
      throw LoadAbort{{"", "document nested deeper than " + std::to_string(kMaxDocumentDepth) + " levels",
                       mark.line + 1, mark.column + 1}};
    }
    Count(0, mark);
    Frame frame;
    frame.node.kind = kind;
    SetMark(frame.node, mark);
    frame.anchor = anchor;
    frame.path = NextChildPath();
    stack_.push_back(std::move(frame));
  }

  void Close() {
    Frame frame = std::move(stack_.back());
    stack_.pop_back();
    Complete(std::move(frame.node), frame.anchor, /*counted=*/true);
  }

  void Complete(DocumentNode node, YAML::anchor_t anchor, bool counted = false) {
    if (!counted) Count(0, YAML::Mark::null_mark());
    if (anchor != 0) {
      if (anchors_.size() <= anchor) anchors_.resize(anchor + 1);
      anchors_[anchor] = node;
    }
    if (stack_.empty()) {
      documents_.push_back(std::move(node));
      return;
    }
    Frame& top = stack_.back();
    if (top.node.kind == Kind::kList) {
      top.node.items.push_back(std::move(node));
      return;
    }
    if (!top.has_key) {
      if (node.kind == Kind::kMap || node.kind == Kind::kList) {
        errors_->push_back({top.path, "map keys must be strings, got a " + std::string(DocumentKindName(node.kind)),
                            node.line, node.column});
      }
      top.has_key = true;
      top.key = node.text;
      return;
    }
    top.has_key = false;
    if (!top.keys.insert(top.key).second) {
      errors_->push_back({ChildPath(top.path, top.key), "duplicate key", node.line, node.column});
      return;
    }
    top.node.members.push_back({std::move(top.key), std::move(node)});
  }

  std::vector<SpecError>* errors_;
  std::vector<Frame> stack_;
  std::vector<std::optional<DocumentNode>> anchors_;
  std::vector<DocumentNode> documents_;
  int64_t nodes_ = 0;
};

void ConvertJson(const nlohmann::json& value, DocumentNode& out, int depth, int64_t& nodes) {
  if (depth > kMaxDocumentDepth) {
    throw LoadAbort{{"", "document nested deeper than " + std::to_string(kMaxDocumentDepth) + " levels"}};
  }
  if (++nodes > kMaxDocumentNodes) {
    throw LoadAbort{{"", "document too large: more than " + std::to_string(kMaxDocumentNodes) + " nodes"}};
  }
  switch (value.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded: out.kind = Kind::kNull; break;
    case nlohmann::json::value_t::boolean:
      out.kind = Kind::kBool;
      out.bool_value = value.get<bool>();
      out.text = out.bool_value ? "true" : "false";
      break;
    case nlohmann::json::value_t::number_integer:
      out.kind = Kind::kInt;
      out.int_value = value.get<int64_t>();
      out.float_value = static_cast<double>(out.int_value);
      out.text = value.dump();
      break;
    case nlohmann::json::value_t::number_unsigned: {
      out.kind = Kind::kInt;
      const uint64_t u = value.get<uint64_t>();
      out.int_fits = u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
      out.int_value = out.int_fits ? static_cast<int64_t>(u) : 0;
      out.float_value = static_cast<double>(u);
      out.text = value.dump();
      break;
    }
    case nlohmann::json::value_t::number_float:
      out.kind = Kind::kFloat;
      out.float_value = value.get<double>();
      out.text = value.dump();
      break;
    case nlohmann::json::value_t::string:
      out.kind = Kind::kString;
      out.text = value.get<std::string>();
      if (!utf8::IsValid(out.text)) throw LoadAbort{{"", "a string is not valid UTF-8"}};
      break;
    case nlohmann::json::value_t::binary:
      out.kind = Kind::kString;
      out.text = std::string(value.get_binary().begin(), value.get_binary().end());
      break;
    case nlohmann::json::value_t::object:
      out.kind = Kind::kMap;
      for (const auto& [key, member] : value.items()) {
        if (!utf8::IsValid(key)) throw LoadAbort{{"", "a key is not valid UTF-8"}};
        out.members.push_back({key, DocumentNode{}});
        ConvertJson(member, out.members.back().value, depth + 1, nodes);
      }
      break;
    case nlohmann::json::value_t::array:
      out.kind = Kind::kList;
      for (const auto& item : value) {
        out.items.emplace_back();
        ConvertJson(item, out.items.back(), depth + 1, nodes);
      }
      break;
  }
}

}  // namespace

const DocumentNode* DocumentNode::Find(const std::string& key) const {
  for (const DocumentMember& m : members) {
    if (m.key == key) return &m.value;
  }
  return nullptr;
}

const char* DocumentKindName(DocumentNode::Kind kind) {
  switch (kind) {
    case Kind::kNull: return "null";
    case Kind::kBool: return "boolean";
    case Kind::kInt: return "integer";
    case Kind::kFloat: return "number";
    case Kind::kString: return "string";
    case Kind::kMap: return "map";
    case Kind::kList: return "list";
  }
  return "value";
}

std::string DescribeNode(const DocumentNode& node) {
  std::string kind = DocumentKindName(node.kind);
  switch (node.kind) {
    case Kind::kString: {
      std::string shown = node.text.size() > 40 ? node.text.substr(0, 40) + "..." : node.text;
      return kind + " \"" + shown + "\"";
    }
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kFloat: return kind + " " + node.text;
    default: return kind;
  }
}

std::string ChildPath(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::string IndexPath(const std::string& parent, size_t index) { return parent + "[" + std::to_string(index) + "]"; }

DocumentLoad LoadYamlDocument(const std::string& text) {
  DocumentLoad load;
  if (text.size() > kMaxDocumentBytes) {
    load.errors.push_back({"", "document larger than " + std::to_string(kMaxDocumentBytes) + " bytes"});
    return load;
  }
  std::vector<SpecError> key_errors;
  TreeBuilder builder(&key_errors);
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    while (parser.HandleNextDocument(builder)) {
    }
  } catch (const LoadAbort& abort) {
    load.errors.push_back(abort.error);
    return load;
  } catch (const YAML::Exception& e) {
    SpecError error{"", "malformed YAML: " + e.msg};
    if (!e.mark.is_null()) {
      error.line = e.mark.line + 1;
      error.column = e.mark.column + 1;
    }
    load.errors.push_back(std::move(error));
    return load;
  }
  std::vector<DocumentNode>& docs = builder.documents();
  // kubectl skips empty documents ("---" alone); so do we.
  std::erase_if(docs, [](const DocumentNode& d) { return d.is_null(); });
  if (docs.empty()) {
    load.errors.push_back({"", "empty document: expected a TrainingJob"});
    return load;
  }
  if (docs.size() > 1) {
    load.errors.push_back({"",
                           "expected one YAML document, found " + std::to_string(docs.size()) +
                               " (the second starts at line " + std::to_string(docs[1].line) + ")",
                           docs[1].line, 0});
    return load;
  }
  load.root = std::move(docs.front());
  load.usable = true;
  load.errors = std::move(key_errors);
  return load;
}

DocumentLoad LoadJsonDocument(const nlohmann::json& value) {
  DocumentLoad load;
  int64_t nodes = 0;
  try {
    ConvertJson(value, load.root, 0, nodes);
    load.usable = true;
  } catch (const LoadAbort& abort) {
    load.errors.push_back(abort.error);
  }
  return load;
}

}  // namespace headroom::spec
