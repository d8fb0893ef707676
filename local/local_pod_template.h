// What `headroom run` makes of a job's spec.template on one machine: the worker's plain
// environment variables are applied; everything that only a cluster can resolve or that
// means nothing to local processes is listed, so the run can say once what it ignores.
//
// Volumes: a hostPath volume mounted at its own path needs nothing on one machine (the
// directory is already there for the workers), so such a mount is applied as it stands
// (named when the path does not exist here).
// A hostPath mounted elsewhere (no mount namespace here to move it), and every other
// volume kind (a PVC, a Secret, ...) with its mounts, is ignored and named.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/spec/pod_template.h"

namespace headroom::local {

struct LocalPodTemplate {
  // spec.template.spec.containers[0].env entries with a plain value, in order.
  std::vector<std::pair<std::string, std::string>> env;
  // What is not applied here, one short phrase each ("nodeSelector", "env HF_TOKEN
  // (valueFrom)", "volume model (persistentVolumeClaim) mounted at /models").
  std::vector<std::string> ignored;
};

LocalPodTemplate ApplicableOnOneMachine(const spec::PodTemplate& t);

// "spec.template: ignored on this machine: A; B; C", or "" when nothing is ignored.
std::string IgnoredTemplateNotice(const LocalPodTemplate& local);

}  // namespace headroom::local
