// A small key-value store over TCP: the rendezvous every multi-rank backend starts from.
//
// Rank 0 serves the store at MASTER_ADDR:MASTER_PORT (a background thread); every rank,
// rank 0 included, is a client of it. Backends use it to exchange what they need before
// they can talk directly: Gloo's per-pair transport addresses, NCCL's unique id.
//
// Contract:
//   - Connect() on rank 0 binds the port (fails at once, naming it, if it is taken); the
//     other ranks retry the connection until the timeout, so ranks may start in any order.
//   - Every blocking call (connect, get, wait, the rendezvous) gives up at its timeout
//     with a CommunicatorError that says what it waited for; nothing blocks forever.
//   - Rendezvous() is a barrier over the store: it returns once all ranks have called
//     it with the same name, or throws naming the ranks that never arrived.
//   - Thread-safe: one request at a time per client connection.
//   - The store lives as long as this object; rank 0 must keep it until the other ranks
//     are done with it (backends keep it for their whole lifetime).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/base/non_copyable.h"
#include "worker/comm/communicator.h"

namespace headroom::worker {

struct TcpStoreOptions {
  std::string host = "127.0.0.1";  // MASTER_ADDR: where rank 0 listens
  int port = 29500;                // MASTER_PORT
  int rank = 0;
  int world_size = 1;
  // How long to wait for rank 0 to come up, and for any key or rendezvous.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
};

class TcpStore : NonCopyable {
 public:
  static std::unique_ptr<TcpStore> Connect(const TcpStoreOptions& options);
  ~TcpStore();

  void Set(const std::string& key, const std::string& value);
  // Waits (up to the store's timeout) until `key` is set, then returns its value.
  std::string Get(const std::string& key);
  std::optional<std::string> TryGet(const std::string& key);
  // Atomically adds `delta` to the integer at `key` (0 when unset); returns the new value.
  int64_t Add(const std::string& key, int64_t delta);
  // Waits until every key is set; throws naming the missing ones at `timeout`.
  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  void Wait(const std::vector<std::string>& keys) { Wait(keys, options_.timeout); }

  // Barrier over the store: every rank calls it with the same `name`; a name is used
  // for one barrier only (its arrival keys stay in the store).
  void Rendezvous(const std::string& name);

  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }
  std::chrono::milliseconds timeout() const { return options_.timeout; }
  // The address of rank 0 as "host:port", for messages.
  std::string master() const;
  // The local IP address this process uses to reach rank 0: the interface a backend
  // should bind so peers on other hosts can reach it.
  const std::string& local_address() const { return local_address_; }

 private:
  class Server;
  explicit TcpStore(const TcpStoreOptions& options);
  // Sends one request, returns (found, payload). Throws CommunicatorError on I/O failure.
  std::pair<bool, std::string> Request(uint8_t op, const std::string& key, const std::string& value);

  TcpStoreOptions options_;
  std::unique_ptr<Server> server_;  // rank 0 only
  int fd_ = -1;
  std::string local_address_;
  std::mutex mu_;
};

}  // namespace headroom::worker
