// Batched autoregressive sampling with a KV cache allocated once for the whole run.
//
// Contract:
//   - The engine owns one KvCache sized (max_batch, max prompt + max response); every
//     Generate() reuses it (no allocation per step; the generation-cache rebuild that
//     fragmented memory in simpleRL-reason cannot happen here).
//   - Row i's randomness comes only from sample_keys[i] (Gumbel-max sampling with noise
//     that is a pure function of the key, the position and the token, made on the model's
//     device: gumbel_noise.h), so a sample is the same whichever rank or batch position
//     rolls it out.
//   - A row stops at a stop token (kept, masked in) or after max_response tokens;
//     positions after it hold the pad token and are masked out. temperature 0 means
//     greedy. Stop and pad tokens: the task's ResponseFormat, given at construction.
//   - With a logit bias set, sampling is restricted the same way ResponseLogProbs is.
//   - Generation ends early once every row has stopped, noticed at the next stop check:
//     one every stop_check_interval tokens (a check reads a flag back from the device, so
//     checking every token would stall the device once per token). The forwards run past
//     the last stop change nothing: stopped rows stay padded and masked out, so outputs do
//     not depend on the interval. With a decode communicator set (the model's forward is a
//     collective: stage 3 over several ranks gathers each block per token), Generate() is
//     collective too: it ends once every rank's rows have stopped (one scalar all_reduce
//     per check, at the same tokens on every rank), so all ranks run the same forwards.
//   - Prompts of different lengths come left-padded to the longest with a count of pad
//     tokens per row (causal_lm.h): every response starts at column P, and a row's
//     tokens are those it would sample alone (to float rounding; bitwise without padding).
//   - Decode modes (set_decode_mode): the tokens after the first are decoded either with
//     the cache growing token by token (kDynamic), or by a shape-static step over buffers
//     kept per batch size (decode_step.h; kStatic runs it eagerly, kGraph replays it as a
//     CUDA graph captured once per batch size, decode_replay.h). Both sample by the same
//     rule from the same noise, so they give the same tokens up to float rounding of the
//     logits (the static step attends over the whole cache with later keys masked). kAuto,
//     the default: kGraph on a CUDA device when the model's forward is local (no block
//     executor: ZeRO stage 3 gathers blocks with collectives inside the forward) of a build
//     that replays graphs, kDynamic elsewhere: the static step run eagerly attends over
//     every key of the cache, so without a graph it is no faster than the growing cache. A kept step is rebuilt when the batch size, the sampling rule or the
//     addresses of the model's parameters change.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "core/base/non_copyable.h"
#include "worker/comm/communicator.h"
#include "worker/model/kv_cache.h"
#include "worker/model/causal_lm.h"
#include "worker/rollout/decode_replay.h"
#include "worker/rollout/decode_step.h"
#include "worker/tasks/task.h"

namespace headroom::worker {

struct Rollout {
  torch::Tensor sequences;       // [B, P + R] int64: prompt, response, PAD after the stop
  torch::Tensor response_mask;   // [B, R] float: 1 for generated tokens up to and incl. EOS
  int64_t prompt_length = 0;     // P, the longest prompt's length
  torch::Tensor prompt_padding;  // [B] int64: pad tokens before row b's prompt; undefined when none
  int64_t response_width = 0;    // R = max_response
  int64_t generated_tokens = 0;  // sum of response_mask

  torch::Tensor responses() const { return sequences.narrow(1, prompt_length, response_width); }
};

// Not copyable: kept decode steps point at this engine's cache.
class RolloutEngine : NonCopyable {
 public:
  // Throws std::invalid_argument for max_response < 1 or a format without a stop token.
  // cache_dtype: the KV cache's (kv_cache.h); bf16 where the model runs its passes without
  // gradient on bf16 weights (the trainer's choice, inference_weights.h).
  RolloutEngine(const KvCacheShape& cache_shape, int64_t max_batch, int64_t max_prompt, int64_t max_response,
                torch::Device device, ResponseFormat format, torch::Dtype cache_dtype = torch::kFloat32);

  // prompts [B, P] int64, left-padded with prompt_padding [B] int64 pad tokens (undefined:
  // every row is P long); one key per row.
  Rollout Generate(CausalLM model, const torch::Tensor& prompts, const std::vector<uint64_t>& sample_keys,
                   double temperature, const torch::Tensor& prompt_padding = {});

  // [vocab]: 0 for tokens a response may use, -inf for the rest; undefined = no restriction.
  void set_logit_bias(torch::Tensor bias) { logit_bias_ = std::move(bias); }
  // Stop tokens (at least one) and the pad token; `allowed` is not read here (the logit
  // bias carries it).
  void set_response_format(ResponseFormat format);
  // The ranks whose forwards must stay in step (nullptr: this rank decides alone).
  void set_decode_communicator(Communicator* comm) { decode_comm_ = comm; }
  // Decode tokens between two stop checks (>= 1; every rank of a decode communicator must
  // use the same). Default kDefaultStopCheckInterval.
  void set_stop_check_interval(int64_t tokens);
  static constexpr int64_t kDefaultStopCheckInterval = 8;

  enum class DecodeMode { kAuto, kDynamic, kStatic, kGraph };
  void set_decode_mode(DecodeMode mode) { decode_mode_ = mode; }
  // Whether the last Generate() replayed a captured CUDA graph for its decode tokens.
  bool last_decode_graphed() const { return last_decode_graphed_; }
  // The mode Generate() takes with this model (kAuto resolved; see the contract above).
  DecodeMode resolved_decode_mode(const CausalLM& model) const;
  // What kAuto stands for: on a CUDA device, with a local forward, in a build that replays
  // graphs, kGraph; else kDynamic. Other requests stand as they are.
  static DecodeMode ResolveDecodeMode(DecodeMode requested, bool cuda_device, bool local_forward, bool graphs_compiled);
  static const char* DecodeModeName(DecodeMode mode);

  const KvCache& cache() const { return cache_; }
  int64_t max_response() const { return max_response_; }

 private:
  // Whether any row (on any rank of decode_comm_) is still generating.
  bool AnyAlive(const torch::Tensor& alive) const;
  // The growing-cache decode and the shape-static one (see the contract above).
  std::pair<torch::Tensor, torch::Tensor> DecodeDynamic(CausalLM& model, const torch::Tensor& prompts,
                                                        const std::vector<uint64_t>& sample_keys, double temperature,
                                                        const torch::Tensor& padding);
  std::pair<torch::Tensor, torch::Tensor> DecodeStatic(CausalLM& model, const torch::Tensor& prompts,
                                                       const std::vector<uint64_t>& sample_keys, double temperature,
                                                       const torch::Tensor& padding, bool graph);
  // The kept static step for this batch and rule, rebuilt when they or the model's
  // parameter addresses changed.
  struct StaticDecode {
    std::unique_ptr<DecodeStep> step;
    std::unique_ptr<DecodeReplay> replay;
    std::vector<const void*> parameters;
    bool graph = false;
  };
  StaticDecode& StaticDecodeFor(CausalLM& model, int64_t batch, double temperature, bool graph);

  KvCache cache_;
  int64_t max_prompt_;
  int64_t max_response_;
  torch::Device device_;
  torch::Tensor logit_bias_;
  std::vector<int64_t> stop_tokens_;
  int64_t pad_token_ = 0;
  Communicator* decode_comm_ = nullptr;
  int64_t stop_check_interval_ = kDefaultStopCheckInterval;
  DecodeMode decode_mode_ = DecodeMode::kAuto;
  bool last_decode_graphed_ = false;
  std::map<int64_t, StaticDecode> static_decodes_;  // by batch size
};

}  // namespace headroom::worker
