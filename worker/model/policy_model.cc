#include <spdlog/spdlog.h>

#include "worker/model/policy_model.h"

#include "worker/model/model_config.h"
#include "worker/model/transformer.h"

namespace headroom::worker {

CausalLM MakePolicyModel(const spec::TrainingJobSpec& spec) { return Transformer(ConfigFromSpec(spec)); }

}  // namespace headroom::worker
