#!/usr/bin/env bash
# Regenerates the TrainingJob CRD (crds/ and the Helm chart's copy) from core/spec's field
# table and overlay (core/spec/training_job_fields.cc, core/spec/crd_overlay.cc), with the
# headroom-crdgen target of the build in build/ (or $HEADROOM_BUILD_DIR).
# tests/core/spec_crd_test.cc fails while the committed files differ from what it writes.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${HEADROOM_BUILD_DIR:-build}
HEADROOM_BUILD_TARGETS=headroom-crdgen scripts/build.sh >/dev/null
"$BUILD_DIR/bin/headroom-crdgen" crds/headroom.dev_trainingjobs.yaml charts/headroom/files/crds/headroom.dev_trainingjobs.yaml
echo "generate-crds: wrote crds/headroom.dev_trainingjobs.yaml and charts/headroom/files/crds/headroom.dev_trainingjobs.yaml"
