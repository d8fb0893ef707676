// A job's spec.template laid over the worker pod the operator built (BuildWorkerPod).
//
// Contract: `pod` is a worker pod as children.cc builds it and `t` a template that passed
// spec::CheckPodTemplate, so nothing it sets collides with what the operator owns. What is
// additive is added after the operator's entries (labels, annotations, tolerations, volumes,
// env, volumeMounts, extra resources); single-valued pod fields are set; security-context
// fields replace the operator's one by one, except capabilities, where the template's add
// joins the operator's drop. An empty template leaves `pod` unchanged.
#pragma once

#include <nlohmann/json.hpp>

#include "core/spec/pod_template.h"

namespace headroom::manifests {

void OverlayPodTemplate(const spec::PodTemplate& t, nlohmann::json& pod);

}  // namespace headroom::manifests
