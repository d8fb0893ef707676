#include <spdlog/spdlog.h>

#include "worker/model/policy_model.h"

#include <algorithm>

#include "worker/model/hf_causal_lm.h"
#include "worker/model/model_config.h"
#include "worker/model/transformer.h"

namespace headroom::worker {

CausalLM MakePolicyModel(const spec::TrainingJobSpec& spec) {
  if (!spec.model.path.empty()) {
    const int64_t sequence = int64_t{spec.grpo.max_prompt_length} + spec.grpo.max_response_length;
    return LoadHfCausalLM(spec.model.path, std::max<int64_t>(spec.model.max_seq_len, sequence));
  }
  return Transformer(ConfigFromSpec(spec));
}

}  // namespace headroom::worker
