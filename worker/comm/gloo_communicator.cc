// The CPU backend: Gloo's TCP transport, connected through headroom's TcpStore.
//
// Every collective carries Gloo's end-to-end timeout (CommunicatorOptions::
// collective_timeout). A peer that dies closes its sockets, which Gloo reports at once as
// an I/O error; a peer that hangs is caught by the timeout. Either way the surviving rank
// throws CommunicatorError, and the communicator stays unusable afterwards (Gloo's pairs
// are broken; the worker's answer is to exit and be restarted from a checkpoint).
//
// reduce_scatter is a ring over Gloo's unbound buffers (W-1 steps, each moving one
// chunk), so it sends (W-1)/W of the input rather than the 2(W-1)/W an all-reduce would,
// and needs two chunks of scratch rather than a full copy.
#include <spdlog/spdlog.h>

#include "worker/comm/communicator_factory.h"
#include "worker/comm/tcp_store.h"

#ifdef HEADROOM_HAVE_GLOO
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>

#include <csignal>
#include <cstdlib>
#include <cstring>

namespace headroom::worker {
namespace {

// Slot prefix for headroom's own point-to-point collectives; Gloo's built-ins use 0x01-0x08.
constexpr uint8_t kReduceScatterSlotPrefix = 0x41;

// Gloo's rendezvous::Store over headroom's TcpStore, under a key prefix.
class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(TcpStore& store, std::string prefix) : store_(store), prefix_(std::move(prefix)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_.Set(prefix_ + key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    std::string value = store_.Get(prefix_ + key);
    return {value.begin(), value.end()};
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, store_.timeout()); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    std::vector<std::string> full;
    for (const auto& key : keys) full.push_back(prefix_ + key);
    store_.Wait(full, timeout);
  }

 private:
  TcpStore& store_;
  std::string prefix_;
};

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <typename T>
ReduceFn ReduceFunction(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return &gloo::sum<T>;
    case ReduceOp::kMax: return &gloo::max<T>;
    case ReduceOp::kMin: return &gloo::min<T>;
  }
  return &gloo::sum<T>;
}

// Calls fn(T{}) with T the C++ type of `dtype`; the dtypes the worker moves over Gloo.
template <typename F>
void DispatchDtype(c10::ScalarType dtype, const char* op, F&& fn) {
  switch (dtype) {
    case torch::kFloat32: return fn(float{});
    case torch::kFloat64: return fn(double{});
    case torch::kInt64: return fn(int64_t{});
    case torch::kInt32: return fn(int32_t{});
    case torch::kUInt8: return fn(uint8_t{});
    default:
      throw CommunicatorError(std::string("gloo ") + op + ": dtype " + std::string(c10::toString(dtype)) +
                              " is not supported (float32, float64, int64, int32, uint8)");
  }
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(const CommunicatorOptions& options) : options_(options) {
    store_ = ConnectRendezvousStore(options);
    // Meet first through our own barrier, so a missing rank is named in the error.
    store_->Rendezvous("gloo/join");

    gloo::transport::tcp::attr attr;
    if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME"); iface != nullptr && *iface != '\0') {
      attr.iface = iface;
    } else {
      // The address this host uses to reach rank 0 is one its peers can reach it at.
      attr.hostname = store_->local_address();
    }
    try {
      device_ = gloo::transport::tcp::CreateDevice(attr);
      auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.world_size);
      context->setTimeout(options.rendezvous_timeout);
      GlooStoreAdapter adapter(*store_, "gloo/mesh/");
      context->connectFullMesh(adapter, device_);
      context->setTimeout(options.collective_timeout);
      context_ = std::move(context);
    } catch (const CommunicatorError&) {
      throw;
    } catch (const std::exception& e) {
      throw CommunicatorError("gloo: rank " + std::to_string(options.rank) +
                              " could not connect to its peers: " + e.what());
    }
    // Every pair is up on every rank before anyone starts a collective.
    store_->Rendezvous("gloo/connected");
  }

  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }
  std::string backend() const override { return "gloo"; }

  void all_reduce(torch::Tensor& tensor, ReduceOp op) override {
    InPlace("all_reduce", tensor, [&](auto zero, torch::Tensor& work) {
      using T = decltype(zero);
      gloo::AllreduceOptions opts(context_);
      opts.setOutput<T>(work.data_ptr<T>(), static_cast<size_t>(work.numel()));
      opts.setReduceFunction(ReduceFunction<T>(op));
      opts.setTag(NextTag());
      gloo::allreduce(opts);
    });
  }

  void reduce_scatter(const torch::Tensor& input, torch::Tensor& output, ReduceOp op) override {
    Run("reduce_scatter", [&] {
      CheckSizes(input, output, "reduce_scatter", "input");
      torch::Tensor in = input.contiguous();
      torch::Tensor out = Contiguous(output, "reduce_scatter");
      DispatchDtype(in.scalar_type(), "reduce_scatter",
                    [&](auto zero) { RingReduceScatter<decltype(zero)>(in, out, op); });
      if (!out.is_same(output)) output.copy_(out);
    });
  }

  void all_gather(const torch::Tensor& input, torch::Tensor& output) override {
    Run("all_gather", [&] {
      CheckSizes(output, input, "all_gather", "output");
      torch::Tensor in = input.contiguous();
      torch::Tensor out = Contiguous(output, "all_gather");
      DispatchDtype(in.scalar_type(), "all_gather", [&](auto zero) {
        using T = decltype(zero);
        gloo::AllgatherOptions opts(context_);
        opts.setInput<T>(in.data_ptr<T>(), static_cast<size_t>(in.numel()));
        opts.setOutput<T>(out.data_ptr<T>(), static_cast<size_t>(out.numel()));
        opts.setTag(NextTag());
        gloo::allgather(opts);
      });
      if (!out.is_same(output)) output.copy_(out);
    });
  }

  void broadcast(torch::Tensor& tensor, int root) override {
    if (root < 0 || root >= options_.world_size) {
      throw CommunicatorError("broadcast: root " + std::to_string(root) + " out of range for world size " +
                              std::to_string(options_.world_size));
    }
    InPlace("broadcast", tensor, [&](auto zero, torch::Tensor& work) {
      using T = decltype(zero);
      gloo::BroadcastOptions opts(context_);
      opts.setOutput<T>(work.data_ptr<T>(), static_cast<size_t>(work.numel()));
      opts.setRoot(root);
      opts.setTag(NextTag());
      gloo::broadcast(opts);
    });
  }

  void barrier() override {
    Run("barrier", [&] {
      gloo::BarrierOptions opts(context_);
      opts.setTag(NextTag());
      gloo::barrier(opts);
    });
  }

 private:
  uint32_t NextTag() { return next_tag_++; }

  // Runs one collective; any failure marks the communicator broken and is rethrown as
  // CommunicatorError naming the operation, this rank and the timeout.
  template <typename F>
  void Run(const char* op, F&& fn) {
    if (!broken_.empty()) {
      throw CommunicatorError(std::string("gloo ") + op + " on rank " + std::to_string(options_.rank) +
                              ": communicator unusable after an earlier failure: " + broken_);
    }
    try {
      fn();
    } catch (const CommunicatorError& e) {
      throw;
    } catch (const std::exception& e) {
      broken_ = e.what();
      throw CommunicatorError(std::string("gloo ") + op + " failed on rank " + std::to_string(options_.rank) + " of " +
                              std::to_string(options_.world_size) + " (a peer died, or did not answer within " +
                              std::to_string(options_.collective_timeout.count()) + " ms): " + e.what());
    }
  }

  // Runs `collective(T{}, work)` (T: the element type) on `tensor` itself when it is
  // contiguous, else on a contiguous copy whose result is then written back.
  template <typename F>
  void InPlace(const char* op, torch::Tensor& tensor, F&& collective) {
    Run(op, [&] {
      torch::Tensor work = Contiguous(tensor, op);
      DispatchDtype(work.scalar_type(), op, [&](auto zero) { collective(zero, work); });
      if (!work.is_same(tensor)) tensor.copy_(work);
    });
  }

  static torch::Tensor Contiguous(const torch::Tensor& t, const char* op) {
    if (!t.device().is_cpu()) {
      throw CommunicatorError(std::string("gloo ") + op + ": tensor is on " + t.device().str() +
                              "; the gloo backend moves CPU tensors");
    }
    return t.is_contiguous() ? t : t.contiguous();
  }

  // `big` must have world_size() times the elements of `small`, and the same dtype.
  void CheckSizes(const torch::Tensor& big, const torch::Tensor& small, const char* op, const char* big_name) const {
    if (big.numel() != small.numel() * options_.world_size) {
      throw CommunicatorError(std::string("gloo ") + op + ": " + big_name + " has " + std::to_string(big.numel()) +
                              " elements, expected world size " + std::to_string(options_.world_size) + " x " +
                              std::to_string(small.numel()));
    }
    if (big.scalar_type() != small.scalar_type()) {
      throw CommunicatorError(std::string("gloo ") + op + ": input and output dtypes differ (" +
                              std::string(c10::toString(big.scalar_type())) + " vs " +
                              std::string(c10::toString(small.scalar_type())) + ")");
    }
  }

  // Ring reduce-scatter. At step s rank r sends its partial sum of chunk (r-s-1) to r+1
  // and receives r-1's partial of chunk (r-s-2), adding its own contribution; after W-1
  // steps the chunk it holds is chunk r, summed over every rank.
  template <typename T>
  void RingReduceScatter(const torch::Tensor& input, torch::Tensor& output, ReduceOp op) {
    const int world = options_.world_size;
    const int rank = options_.rank;
    const size_t n = static_cast<size_t>(output.numel());
    const T* in = input.data_ptr<T>();
    T* out = output.data_ptr<T>();
    if (world == 1 || n == 0) {
      std::memcpy(out, in + rank * n, n * sizeof(T));
      return;
    }
    const ReduceFn reduce = ReduceFunction<T>(op);
    std::vector<T> send(n), recv(n);
    auto send_buffer = context_->createUnboundBuffer(send.data(), n * sizeof(T));
    auto recv_buffer = context_->createUnboundBuffer(recv.data(), n * sizeof(T));
    const int right = (rank + 1) % world;
    const int left = (rank + world - 1) % world;
    const auto timeout = context_->getTimeout();
    std::memcpy(send.data(), in + static_cast<size_t>((rank + world - 1) % world) * n, n * sizeof(T));
    for (int step = 0; step < world - 1; ++step) {
      const uint64_t slot = gloo::Slot::build(kReduceScatterSlotPrefix, NextTag());
      send_buffer->send(right, slot);
      recv_buffer->recv(left, slot);
      if (!recv_buffer->waitRecv(timeout) || !send_buffer->waitSend(timeout)) {
        throw CommunicatorError("reduce_scatter: transfer aborted at ring step " + std::to_string(step));
      }
      const int chunk = ((rank - step - 2) % world + world) % world;
      T* target = step == world - 2 ? out : send.data();
      reduce(target, recv.data(), in + static_cast<size_t>(chunk) * n, n);
    }
  }

  CommunicatorOptions options_;
  std::unique_ptr<TcpStore> store_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;
  uint32_t next_tag_ = 1;
  std::string broken_;
};

}  // namespace

std::unique_ptr<Communicator> MakeGlooCommunicator(const CommunicatorOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    throw CommunicatorError("gloo: rank " + std::to_string(options.rank) + " out of range for world size " +
                            std::to_string(options.world_size));
  }
  // Gloo's TCP transport writes with plain write(): to a peer that died, that raises
  // SIGPIPE, whose default action killed this rank (signal 13) before Gloo could report
  // the broken pair, so the survivor of a dead peer died instead of throwing
  // CommunicatorError. Ignored, the write fails with EPIPE and Gloo throws. Process-wide,
  // and only when nobody installed a handler.
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
  return std::make_unique<GlooCommunicator>(options);
}

}  // namespace headroom::worker

#endif  // HEADROOM_HAVE_GLOO
