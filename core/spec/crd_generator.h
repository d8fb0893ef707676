// The TrainingJob CustomResourceDefinition, generated: spec's schema from the field table
// (training_job_fields.h), the rest from the hand-written overlay (crd_overlay.h).
// scripts/generate-crds.sh writes it to crds/ and the chart; tests/core/spec_crd_test.cc
// holds the committed files to it.
#pragma once

#include <string>

namespace headroom::spec {

// The CRD as YAML text, byte for byte what crds/headroom.dev_trainingjobs.yaml holds.
std::string TrainingJobCrdYaml();

}  // namespace headroom::spec
