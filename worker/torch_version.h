// The LibTorch version being compiled against, for the few places whose API moved between
// the versions headroom builds with (Debian's 1.13 on CPU, a PyTorch 2.x wheel's on GPU).
// scripts/check-libtorch-versions.sh checks each gate against LibTorch headers.
#pragma once

#include <torch/version.h>

// Whether the LibTorch being compiled against is at least major.minor.
#define HEADROOM_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))
