// TCP ports that are free right now. The rendezvous port of a local run, the operator's
// endpoints on --metrics-port 0, and tests' servers all pick ports this way.
//
// A port is only free at the time of the call: another program may take it before the
// caller binds it. The ports are chosen below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), where it never picks a connection's source port, so the
// only way to lose one is another program choosing the same port explicitly, not any of
// the many connections a machine opens meanwhile. Callers that can bind port 0 themselves
// and report the port (a worker's /metrics) do that instead.
#pragma once

#include <string>

namespace headroom::net {

// `count` consecutive ports free right now on `address` (IPv4); returns the first.
// Throws std::runtime_error naming the address and the system's reason when no port can
// be bound (a bad address, no sockets left).
int FreePorts(int count, const std::string& address = "127.0.0.1");

// One port: FreePorts(1, address).
int FreePort(const std::string& address = "127.0.0.1");

}  // namespace headroom::net
