// TestPki: a throwaway certificate authority for TLS tests, generated in memory with
// OpenSSL (EC P-256, valid for a day): a CA, a server certificate for 127.0.0.1 and
// localhost signed by it, and a client certificate signed by it. A second TestPki is a
// different CA, so trusting the wrong one must fail verification.
#pragma once

#include <string>

namespace headroom::testserver {

struct KeyPair {
  std::string cert_pem;
  std::string key_pem;
};

struct TestPki {
  KeyPair ca;
  KeyPair server;  // subjectAltName: IP 127.0.0.1, DNS localhost
  KeyPair client;  // CN "headroom-test-client"

  static TestPki Generate();
};

}  // namespace headroom::testserver
