// The checkpoint format (core/checkpoint: names, manifest, checksums, durable publish) as
// the worker uses it: its names in this namespace, and LibTorch dtypes mapped to the
// manifest's dtype names.
#pragma once

#include <torch/torch.h>

#include <string>

#include "core/checkpoint/base64.h"
#include "core/checkpoint/checkpoint_error.h"
#include "core/checkpoint/checkpoint_layout.h"
#include "core/checkpoint/checkpoint_manifest.h"
#include "core/checkpoint/durable_file.h"

namespace headroom::worker {

using checkpoint::CheckpointError;
using checkpoint::CheckpointManifest;
using checkpoint::ShardEntry;
using checkpoint::TensorEntry;

using checkpoint::kCorruptSuffix;
using checkpoint::kExpAvgSqTensorPrefix;
using checkpoint::kExpAvgTensorPrefix;
using checkpoint::kLatestFileName;
using checkpoint::kManifestFileName;
using checkpoint::kModelTensorPrefix;
using checkpoint::kOptimizerStepTensor;
using checkpoint::kPartialSuffix;

using checkpoint::Base64Decode;
using checkpoint::Base64Encode;
using checkpoint::CompleteSteps;
using checkpoint::DurableFile;
using checkpoint::LatestCheckpoint;
using checkpoint::ParseStepDirName;
using checkpoint::PruneCheckpoints;
using checkpoint::RankFileName;
using checkpoint::ReadWholeFile;
using checkpoint::ReplaceFileAtomically;
using checkpoint::StepDirName;
using checkpoint::SyncDirectory;
using checkpoint::WriteLatest;

// "float32", "bfloat16", ... <-> the torch dtype; throws CheckpointError for others.
std::string DtypeName(c10::ScalarType dtype);
c10::ScalarType DtypeFromName(const std::string& name);

}  // namespace headroom::worker
