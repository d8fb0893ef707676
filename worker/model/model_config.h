// The transformer's dimensions, resolved from a TrainingJob.
//
// Architecture (core/spec/model_presets.h documents the same in ParameterCount): token
// embedding [vocab, hidden] and a separate output head [hidden -> vocab] (untied), learned
// absolute positions [max_seq_len, hidden], `layers` pre-norm blocks (LayerNorm with
// weight+bias; causal self-attention with a fused qkv projection and an output
// projection, both with bias; a GELU MLP hidden -> ffn_hidden -> hidden with bias), and a
// final LayerNorm.
#pragma once

#include <cstdint>
#include <string>

#include "core/spec/training_job.h"

namespace headroom::worker {

struct TransformerConfig {
  int64_t vocab_size = 32;
  int64_t layers = 2;
  int64_t hidden = 64;
  int64_t heads = 4;
  int64_t ffn_hidden = 256;
  int64_t max_seq_len = 16;
  uint64_t seed = 1;  // weight initialisation

  int64_t head_dim() const { return hidden / heads; }
  // Throws std::invalid_argument naming the first bad dimension.
  void Validate() const;
  // Exact count of the architecture above.
  int64_t ParameterCount() const;
  std::string ToString() const;  // "2x64x4 ffn 256 seq 16 vocab 32"
};

// Dimensions from spec.model (filled from the preset by spec::ApplyDefaults); max_seq_len
// at least maxPromptLength + maxResponseLength; seed = model.seed, else task.seed.
TransformerConfig ConfigFromSpec(const spec::TrainingJobSpec& spec);

}  // namespace headroom::worker
