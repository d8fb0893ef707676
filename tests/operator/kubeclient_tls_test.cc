// TLS for real: the test API server serves HTTPS with a certificate from a CA generated
// in the test; the client must trust exactly that CA, and client certificates work.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <openssl/evp.h>

#include "operator/kubeclient/resource_client.h"
#include "operator/kubeclient/watcher.h"
#include "tests/operator/testserver/api_server.h"
#include "tests/operator/testserver/test_certs.h"

namespace headroom::kubeclient {
namespace {

using testserver::TestApiServer;
using testserver::TestPki;

std::string Base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

class KubeTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_ = new TestPki(TestPki::Generate());
    other_ = new TestPki(TestPki::Generate());
  }
  static void TearDownTestSuite() {
    delete pki_;
    delete other_;
  }
  static TestPki* pki_;
  static TestPki* other_;
};
TestPki* KubeTlsTest::pki_ = nullptr;
TestPki* KubeTlsTest::other_ = nullptr;

TEST_F(KubeTlsTest, KubeconfigWithCaDataVerifiesTheServer) {
  testserver::TestApiServerOptions options;
  options.server_cert_pem = pki_->server.cert_pem;
  options.server_key_pem = pki_->server.key_pem;
  options.ca_pem = pki_->ca.cert_pem;
  TestApiServer server(options);
  server.Start();
  ASSERT_EQ(server.url().rfind("https://", 0), 0u);

  const std::string kubeconfig = "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                                 "clusters:\n- name: c\n  cluster:\n    server: " +
                                 server.url() + "\n    certificate-authority-data: " + Base64(pki_->ca.cert_pem) +
                                 "\ncontexts:\n- name: t\n  context: {cluster: c, user: u, namespace: ns1}\n"
                                 "users:\n- name: u\n  user: {token: x}\n";
  KubeConfig config = ParseKubeconfig(kubeconfig, "", "", "inline kubeconfig");
  RestClient client(config);
  ResourceClient jobs(client, resources::kTrainingJobs);
  jobs.Create(config.ns, {{"metadata", {{"name", "a"}}}, {"spec", {{"workers", 1}}}});
  EXPECT_EQ(Name(jobs.Get("ns1", "a")), "a");
  EXPECT_EQ(jobs.List("ns1")["items"].size(), 1u);
}

TEST_F(KubeTlsTest, WrongCaIsRefused) {
  testserver::TestApiServerOptions options;
  options.server_cert_pem = pki_->server.cert_pem;
  options.server_key_pem = pki_->server.key_pem;
  TestApiServer server(options);
  server.Start();
  KubeConfig config = server.ClientConfig();
  config.ca_pem = other_->ca.cert_pem;  // a CA that did not sign the server's certificate
  RestClientOptions client_options;
  client_options.max_retries = 0;
  RestClient client(config, client_options);
  try {
    ResourceClient(client, resources::kPods).List("ns1");
    FAIL() << "a server certificate from another CA must not be accepted";
  } catch (const ApiError& e) {
    EXPECT_TRUE(e.IsTransport()) << e.what();
  }
  EXPECT_EQ(server.requests(), 0) << "no request got through";
}

TEST_F(KubeTlsTest, ClientCertificateAuthentication) {
  testserver::TestApiServerOptions options;
  options.server_cert_pem = pki_->server.cert_pem;
  options.server_key_pem = pki_->server.key_pem;
  options.ca_pem = pki_->ca.cert_pem;
  options.client_ca_pem = pki_->ca.cert_pem;
  TestApiServer server(options);
  server.Start();
  RestClientOptions client_options;
  client_options.max_retries = 0;

  KubeConfig anonymous = server.ClientConfig();
  RestClient no_cert(anonymous, client_options);
  EXPECT_THROW(ResourceClient(no_cert, resources::kPods).List("ns1"), ApiError);

  KubeConfig with_cert = server.ClientConfig();
  with_cert.client_cert_pem = pki_->client.cert_pem;
  with_cert.client_key_pem = pki_->client.key_pem;
  RestClient client(with_cert, client_options);
  EXPECT_TRUE(ResourceClient(client, resources::kPods).List("ns1")["items"].empty());

  KubeConfig foreign = with_cert;
  foreign.client_cert_pem = other_->client.cert_pem;
  foreign.client_key_pem = other_->client.key_pem;
  RestClient foreign_client(foreign, client_options);
  EXPECT_THROW(ResourceClient(foreign_client, resources::kPods).List("ns1"), ApiError);
}

TEST_F(KubeTlsTest, WatchStreamsOverTls) {
  testserver::TestApiServerOptions options;
  options.server_cert_pem = pki_->server.cert_pem;
  options.server_key_pem = pki_->server.key_pem;
  options.ca_pem = pki_->ca.cert_pem;
  TestApiServer server(options);
  server.Start();
  RestClient client(server.ClientConfig());
  ResourceClient jobs(client, resources::kTrainingJobs);
  std::atomic<int> added{0};
  Watcher::Handlers handlers;
  handlers.on_event = [&](const WatchEvent& e) { added += e.type == WatchEvent::Type::kAdded; };
  Watcher::Options watch_options;
  watch_options.ns = "ns1";
  Watcher watcher(jobs, watch_options, handlers);
  watcher.Start();
  while (server.open_watches() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  jobs.Create("ns1", {{"metadata", {{"name", "a"}}}, {"spec", {{"workers", 1}}}});
  for (int i = 0; i < 400 && added == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(added, 1);
}

}  // namespace
}  // namespace headroom::kubeclient
