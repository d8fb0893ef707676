// The TrainingJob's spec, field by field, once: each field's YAML name, the C++ member it
// lives in, its type, its range or allowed names, and its documentation. The parser, the
// serializer, the defaults, the validator and the CRD generator all walk this one table
// (training_job_fields.cc), so a field is added in one row (docs/design.md, "Adding a
// spec field").
//
// What the table does not hold:
//   - defaults: a field's default is its member initialiser in training_job.h, read here
//     from a default-constructed TrainingJobSpec (the compiler checks its type);
//     defaults derived from other fields (model dims from the preset) are ApplyDefaults';
//   - cross-field rules: a small hand-written overlay, in the validator (keyed by the path
//     they report) and as CEL in crd_overlay.cc;
//   - the document around spec (apiVersion, kind, metadata: the API server's ObjectMeta)
//     and spec.template's insides (a Kubernetes PodTemplateSpec, core/spec/pod_template.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/spec/training_job.h"

namespace headroom::spec {

enum class FieldKind {
  kBool,
  kInt,            // int: CRD int32
  kInt64,          // int64_t: CRD int64
  kUint64,         // uint64_t: CRD int64, minimum 0 (the parser refuses negatives)
  kOptionalInt64,  // std::optional<int64_t>: CRD int64 with no default; unset is left out
  kDouble,         // CRD number
  kString,
  kQuantity,     // std::string holding a Kubernetes quantity ("2", "500m", "4Gi"), > 0
  kByteCount,    // int64_t read from an integer or a quantity string ("48Mi"), >= 0
  kActions,      // std::vector<GuardAction>, written as their names, each at most once
  kStrings,      // std::vector<std::string>, each at most once (allowed ones: `names`, when set)
  kObject,       // a nested struct: `fields` are its members
  kPodTemplate,  // PodTemplate: read, written and checked by core/spec/pod_template.h
};

// How a quantity's text becomes the number ApplyDefaults stores beside it.
enum class QuantityUnit { kMillis, kBytes };

struct FieldDef {
  std::string name;  // the YAML/JSON name: "groupSize"
  FieldKind kind = FieldKind::kObject;
  // The member inside its parent struct (TrainingJobSpec for the top rows).
  void* (*member)(void* parent) = nullptr;
  std::vector<FieldDef> fields;  // kObject

  // Range of a number (inclusive unless exclusive_*); the validator and the CRD both hold it.
  std::optional<double> minimum, maximum;
  bool exclusive_minimum = false, exclusive_maximum = false;
  // Allowed values of a string; empty: any string.
  std::vector<std::string> (*names)() = nullptr;
  // The C++ validator leaves the range to a hand-written rule (model dims, filled from the
  // preset after the CRD has seen them as 0).
  bool range_in_crd_only = false;

  // CRD-only string constraints (the C++ validator has a semantic check instead: DNS
  // names, Hub repository ids, non-empty keys).
  std::optional<int> min_length, max_length;
  std::string pattern;

  // kQuantity: the member ApplyDefaults fills from the text, and how to read the text.
  void* (*parsed)(void* parent) = nullptr;
  QuantityUnit unit = QuantityUnit::kBytes;
  std::string parsed_name;  // "cpu_millis", named by the validator's message

  // Whether the CRD states the default (false: unset means "derived" or "none").
  bool crd_default = true;
  // kObject: the serializer writes it only when this says so (null: always).
  bool (*written)(const void* object) = nullptr;
  std::vector<std::string> required;  // kObject: CRD `required`

  std::string doc;        // the CRD description (kubectl explain)
  std::string items_doc;  // kActions, kStrings: the description of one item
};

// The rows of spec, in the order the serializer writes them and docs/design.md lists them.
const std::vector<FieldDef>& SpecFields();

// The member `Member` of its class, reached through a void* to the class. The kind is
// derived from the member's type, so a row cannot say int for a double.
template <auto Member>
struct MemberOf;
template <class Class, class Type, Type Class::*Member>
struct MemberOf<Member> {
  using ClassType = Class;
  using ValueType = Type;
  static void* Get(void* parent) { return &(static_cast<Class*>(parent)->*Member); }
};

template <auto Member>
auto& At(void* parent) {
  return *static_cast<typename MemberOf<Member>::ValueType*>(MemberOf<Member>::Get(parent));
}

}  // namespace headroom::spec
