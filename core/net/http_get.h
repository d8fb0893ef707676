// A plain-HTTP GET with a hard deadline, for scraping /metrics (the operator's reconcile loop, a pod's
// launcher gathering its ranks'): connect, send, and read all bounded by one deadline, so a pod that
// accepts and never answers costs the reconciler at most `timeout`, never a stuck worker
// thread (cpprest's client has no total deadline, only per-operation timeouts).
//
// Contract: returns the body of a 200 answer; nullopt for anything else (refused,
// timed out, non-200, a body over max_bytes), with the reason in *why when non-null.
// IPv4 literal hosts only (pod IPs); HTTP/1.0 so the server closes the connection.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace headroom::net {

std::optional<std::string> HttpGet(const std::string& ipv4, int port, const std::string& path,
                                   std::chrono::milliseconds timeout, std::string* why = nullptr,
                                   size_t max_bytes = 4 << 20);

}  // namespace headroom::net
