// One YAML or JSON document as a typed tree that remembers where each node was written.
//
// Why not decode straight from yaml-cpp nodes or nlohmann::json: the spec decoder must
// treat both sources the same (kubectl sends YAML, the API server returns JSON), must
// know the line of every node for messages, and must type plain YAML scalars the way the
// API server would see them after kubectl's YAML-to-JSON conversion. So both sources are
// loaded into this tree first, and the decoder reads only the tree.
//
// YAML scalars are typed by the YAML 1.2 core schema: plain `true`/`false` are booleans,
// `null`/`~`/empty are null, `12`/`0x1f`/`0o17` integers, `1.5`/`3e-4`/`.inf` numbers,
// everything else and every quoted or block scalar is a string. (kubectl's YAML 1.1 also
// reads `yes`/`no`/`on`/`off` as booleans; here they are strings, and a boolean field says
// so rather than guessing.)
//
// Loading is bounded so that hostile input cannot exhaust the stack or memory: nesting
// deeper than kMaxDepth, more than kMaxNodes nodes (aliases count every time they are
// expanded) and text over kMaxBytes are errors, not crashes.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/spec/training_job.h"

namespace headroom::spec {

struct DocumentMember;

struct DocumentNode {
  enum class Kind { kNull, kBool, kInt, kFloat, kString, kMap, kList };

  Kind kind = Kind::kNull;
  bool bool_value = false;
  int64_t int_value = 0;                // kInt, when int_fits
  bool int_fits = true;                 // kInt: false when the integer is beyond int64
  double float_value = 0;               // kFloat; kInt as a double
  std::string text;                     // scalars as written (kString: the string itself)
  std::vector<DocumentMember> members;  // kMap, in document order
  std::vector<DocumentNode> items;      // kList
  int line = 0;                         // 1-based; 0 when unknown (JSON objects)
  int column = 0;

  // The member named `key`, or nullptr (also when this is not a map).
  const DocumentNode* Find(const std::string& key) const;
  bool is_null() const { return kind == Kind::kNull; }
};

struct DocumentMember {
  std::string key;
  DocumentNode value;
};

// "null", "boolean", "integer", "number", "string", "map", "list".
const char* DocumentKindName(DocumentNode::Kind kind);
// How `node` reads in a message: `string "abc"`, `integer 3`, `map`, ...
std::string DescribeNode(const DocumentNode& node);

struct DocumentLoad {
  DocumentNode root;
  bool usable = false;            // false: nothing could be loaded; errors say why
  std::vector<SpecError> errors;  // also set when usable (duplicate or non-string keys)
};

inline constexpr int kMaxDocumentDepth = 64;
inline constexpr int64_t kMaxDocumentNodes = 100000;
inline constexpr size_t kMaxDocumentBytes = 3 << 20;  // the API server's request limit

// Loads exactly one YAML (or JSON, a subset) document. Malformed YAML is reported with its
// line and column at path ""; so are an empty input and more than one document. Duplicate
// keys, non-scalar keys and strings that are not UTF-8 are reported at their path.
DocumentLoad LoadYamlDocument(const std::string& text);

// Converts a JSON value (as the API server returns objects). Fails only on the size
// bounds and on strings that are not UTF-8 (possible in a value built in code); JSON has
// no lines, so line and column stay 0.
DocumentLoad LoadJsonDocument(const nlohmann::json& value);

// Joins a path: ChildPath("spec", "grpo") == "spec.grpo", ChildPath("", "spec") == "spec".
std::string ChildPath(const std::string& parent, const std::string& key);
// IndexPath("spec.memoryGuard.actions", 2) == "spec.memoryGuard.actions[2]".
std::string IndexPath(const std::string& parent, size_t index);

}  // namespace headroom::spec
