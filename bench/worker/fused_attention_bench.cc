// The fused CPU attention (worker/model/fused_attention.h) against the matmul path it
// replaces, forward + backward, over sequence lengths: where the fused kernel stops
// winning is where kFusedAttentionMaxKeys belongs. Prints one line per shape with the
// ratio matmul time / fused time (> 1: fused is faster).
//
//   fused_attention_bench [--threads N]
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include "worker/model/fused_attention.h"

using namespace headroom::worker;

namespace {

double SecondsPerCall(const std::function<void()>& call) {
  for (int i = 0; i < 3; ++i) call();
  int reps = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  while (elapsed < 0.3 || reps < 5) {
    call();
    ++reps;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return elapsed / reps;
}

// What HfCausalLMImpl::Block does without the fused kernel.
torch::Tensor MatmulAttention(const torch::Tensor& qkv, int64_t heads) {
  const int64_t b = qkv.size(0), t = qkv.size(1), hidden = qkv.size(2) / 3, dim = hidden / heads;
  auto parts = qkv.view({b, t, 3, heads, dim}).permute({2, 0, 3, 1, 4});
  auto mask = torch::full({t, t}, -std::numeric_limits<float>::infinity()).triu(1);
  auto att = torch::matmul(parts[0], parts[1].transpose(-2, -1)).mul_(1.0 / std::sqrt(static_cast<double>(dim)));
  auto y = torch::matmul(torch::softmax(att + mask, -1), parts[2]);
  return y.transpose(1, 2).reshape({b, t, hidden});
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::stoi(argv[i + 1]);
  }
  torch::set_num_threads(threads);
  struct Shape {
    const char* preset;
    int64_t rows, heads, dim;
  };
  // 1280 positions per batch, as the benchmark step's update (128 sequences x 10).
  for (const Shape& s : {Shape{"tiny", 0, 4, 16}, Shape{"small", 0, 8, 64}}) {
    for (int64_t t : {10, 32, 64, 128, 256}) {
      const int64_t b = std::max<int64_t>(1, 1280 / t);
      auto qkv = torch::randn({b, t, 3 * s.heads * s.dim}).requires_grad_(true);
      auto upstream = torch::randn({b, t, s.heads * s.dim});
      const double fused = SecondsPerCall([&] {
        (FusedSelfAttention(qkv, s.heads) * upstream).sum().backward();
        qkv.mutable_grad() = torch::Tensor();
      });
      const double matmul = SecondsPerCall([&] {
        (MatmulAttention(qkv, s.heads) * upstream).sum().backward();
        qkv.mutable_grad() = torch::Tensor();
      });
      std::printf("%-5s heads %2lld x %2lld, %3lld seqs x %3lld tokens: fused %.3f ms, matmul %.3f ms = %.2fx%s\n",
                  s.preset, static_cast<long long>(s.heads), static_cast<long long>(s.dim), static_cast<long long>(b),
                  static_cast<long long>(t), fused * 1e3, matmul * 1e3, matmul / fused,
                  t <= kFusedAttentionMaxKeys ? "" : "  (beyond kFusedAttentionMaxKeys)");
    }
  }
  return 0;
}
