// The hand-written parts of the TrainingJob CRD, beside the field table
// (training_job_fields.h) the rest is generated from: the document around the schema,
// the CEL rules that tie fields together, spec.template's schema. YAML text; the
// generator (crd_generator.h) reads it with the spec loader.
#pragma once

#include <string>

namespace headroom::spec {

// The comment the generated file starts with.
const char* CrdHeaderComment();
// The whole CustomResourceDefinition with spec's `properties: {}` left for the table.
const char* CrdSkeletonYaml();
// The x-kubernetes-validations list of the object at `path` ("spec", "spec.model"), or
// nullptr when it has none. $(presetHidden) and $(presetHeads) stand for the presets'
// dims as a CEL conditional chain, which the generator writes from model_presets.cc.
const char* CelRulesYaml(const std::string& path);
// The `properties` of spec.template (a PodTemplateSpec's metadata and spec).
const char* PodTemplateSchemaYaml();

}  // namespace headroom::spec
