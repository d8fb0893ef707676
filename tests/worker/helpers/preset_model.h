// Small models of the presets' architecture (core/spec/model_presets.h) for tests: the
// dimensions a test picks, built exactly as ModelSource::LoadPolicy builds a preset.
#pragma once

#include <spdlog/spdlog.h>

#include <cstdint>

#include "core/spec/model_presets.h"
#include "worker/model/hf_causal_lm.h"

namespace headroom::testing {

struct ModelDims {
  int layers = 2;
  int hidden = 32;
  int heads = 4;
  int ffn_hidden = 64;
  int max_seq_len = 12;
  uint64_t seed = 1;
};

inline hf::HfModelConfig PresetConfig(const ModelDims& d) {
  spec::ModelSpec m;
  m.preset = "";
  m.layers = d.layers;
  m.hidden = d.hidden;
  m.heads = d.heads;
  m.ffn_hidden = d.ffn_hidden;
  m.max_seq_len = d.max_seq_len;
  return spec::PresetModelConfig(m);
}

inline worker::HfCausalLM PresetModel(const ModelDims& d) {
  return worker::HfCausalLM(PresetConfig(d), d.max_seq_len, d.seed);
}

}  // namespace headroom::testing
