#include <spdlog/spdlog.h>

#include "worker/comm/communicator_factory.h"

#include <cerrno>
#include <cstdlib>
#include <stdexcept>

#include "core/protocol/environment.h"
#include "worker/comm/tcp_store.h"

namespace headroom::worker {
namespace {

// The integer in environment variable `name`, or `fallback` when unset or empty.
long EnvInt(const char* name, long fallback, long min_value, long max_value) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  long value = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < min_value || value > max_value) {
    throw std::invalid_argument(std::string(name) + "='" + text + "': expected an integer in [" +
                                std::to_string(min_value) + ", " + std::to_string(max_value) + "]");
  }
  return value;
}

}  // namespace

CommunicatorOptions CommunicatorOptionsFromEnv(const std::string& backend) {
  CommunicatorOptions options;
  options.backend = backend;
  options.world_size = static_cast<int>(EnvInt(protocol::kWorldSizeEnv, 1, 1, 1 << 20));
  options.rank = static_cast<int>(EnvInt(protocol::kRankEnv, 0, 0, 1 << 20));
  if (options.rank >= options.world_size) {
    throw std::invalid_argument("RANK=" + std::to_string(options.rank) +
                                " is not below WORLD_SIZE=" + std::to_string(options.world_size));
  }
  options.local_rank = static_cast<int>(EnvInt(protocol::kLocalRankEnv, 0, 0, 1 << 16));
  if (const char* addr = std::getenv(protocol::kMasterAddrEnv); addr != nullptr && *addr != '\0')
    options.master_addr = addr;
  options.master_port = static_cast<int>(EnvInt(protocol::kMasterPortEnv, 29500, 1, 65535));
  options.rendezvous_timeout = std::chrono::seconds(EnvInt(protocol::kRendezvousTimeoutEnv, 300, 1, 7 * 24 * 3600));
  options.collective_timeout = std::chrono::seconds(EnvInt(protocol::kCollectiveTimeoutEnv, 300, 1, 7 * 24 * 3600));
  return options;
}

std::unique_ptr<Communicator> MakeCommunicator(const CommunicatorOptions& options) {
  if (options.backend == "local") {
    if (options.world_size != 1) {
      throw CommunicatorError("backend 'local' runs one rank, but WORLD_SIZE is " + std::to_string(options.world_size) +
                              "; use 'gloo' or 'nccl'");
    }
    return MakeLocalCommunicator();
  }
  if (options.backend == "gloo") return MakeGlooCommunicator(options);
  if (options.backend == "nccl") return MakeNcclCommunicator(options);
  throw CommunicatorError("unknown communicator backend '" + options.backend + "' (local, gloo, nccl)");
}

std::unique_ptr<Communicator> MakeCommunicator(const std::string& backend, int rank, int world_size,
                                               const std::string& master_addr, int master_port,
                                               std::chrono::milliseconds timeout) {
  return MakeCommunicator(CommunicatorOptions{backend, rank, world_size, master_addr, master_port,
                                              /*local_rank=*/0, timeout, timeout});
}

std::unique_ptr<TcpStore> ConnectRendezvousStore(const CommunicatorOptions& options) {
  return TcpStore::Connect(TcpStoreOptions{options.master_addr, options.master_port, options.rank, options.world_size,
                                           options.rendezvous_timeout});
}

#ifndef HEADROOM_HAVE_NCCL
std::unique_ptr<Communicator> MakeNcclCommunicator(const CommunicatorOptions&) {
  throw CommunicatorError("this headroom-worker was built without NCCL; use the 'gloo' backend");
}
#endif
#ifndef HEADROOM_HAVE_GLOO
std::unique_ptr<Communicator> MakeGlooCommunicator(const CommunicatorOptions&) {
  throw CommunicatorError("this headroom-worker was built without Gloo (libgloo-dev)");
}
#endif

}  // namespace headroom::worker
