// Choosing and starting a communicator from torchrun's environment.
//
// Contract:
//   - CommunicatorOptionsFromEnv reads RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and
//     LOCAL_RANK (torchrun's names), plus HEADROOM_RENDEZVOUS_TIMEOUT_SECONDS (how long
//     ranks wait for each other at start, default 300) and
//     HEADROOM_COLLECTIVE_TIMEOUT_SECONDS (how long one collective may wait for a peer
//     before every surviving rank throws, default 300). A malformed value is an error
//     naming the variable; unset RANK/WORLD_SIZE mean a single process.
//   - MakeCommunicator returns a started communicator: for world size > 1 it has met
//     every other rank (or thrown CommunicatorError naming the ranks that never came).
//     backend "local" needs world size 1; "gloo" runs on CPU tensors; "nccl" on CUDA
//     device memory (only in builds with NCCL; otherwise a clear error).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "worker/comm/communicator.h"

namespace headroom::worker {

class TcpStore;

struct CommunicatorOptions {
  std::string backend = "gloo";  // "local" | "gloo" | "nccl"
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int local_rank = 0;  // the CUDA device for NCCL
  std::chrono::milliseconds rendezvous_timeout = std::chrono::seconds(300);
  std::chrono::milliseconds collective_timeout = std::chrono::seconds(300);
};

// Throws std::invalid_argument naming the variable when one is malformed.
CommunicatorOptions CommunicatorOptionsFromEnv(const std::string& backend);

std::unique_ptr<Communicator> MakeCommunicator(const CommunicatorOptions& options);

// The short form: one timeout for both the rendezvous and each collective.
std::unique_ptr<Communicator> MakeCommunicator(const std::string& backend, int rank, int world_size,
                                               const std::string& master_addr, int master_port,
                                               std::chrono::milliseconds timeout);

// Connects to the rendezvous store at master_addr:master_port as this rank (rank 0 serves
// it), waiting at most rendezvous_timeout: where every multi-rank backend meets first.
std::unique_ptr<TcpStore> ConnectRendezvousStore(const CommunicatorOptions& options);

// Backends, for callers that know which one they want.
std::unique_ptr<Communicator> MakeGlooCommunicator(const CommunicatorOptions& options);
// Throws CommunicatorError in builds without NCCL.
std::unique_ptr<Communicator> MakeNcclCommunicator(const CommunicatorOptions& options);

}  // namespace headroom::worker
