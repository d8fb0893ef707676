// Precompiled header for every LibTorch translation unit.
// Order matters: spdlog (bundling fmt 9) must be seen before any torch header, or
// the build fails on fmt's and c10's clashing definitions.
#pragma once
#include <spdlog/spdlog.h>
#include <torch/torch.h>
