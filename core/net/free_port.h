// A TCP port that is free right now: bind port 0 on `address`, read back what the kernel
// chose, close. The rendezvous port of a local run, the operator's endpoints on
// --metrics-port 0, and tests' servers all pick ports this way.
//
// The port is only free at the time of the call: another process may take it before the
// caller binds it. Callers that can bind port 0 themselves and report the port (a worker's
// /metrics) do that instead.
#pragma once

#include <string>

namespace headroom::net {

// Throws std::runtime_error naming the address and the system's reason when no port can
// be bound (a bad address, no sockets left).
int FreePort(const std::string& address = "127.0.0.1");

}  // namespace headroom::net
