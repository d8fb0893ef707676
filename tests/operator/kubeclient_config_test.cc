// kubeconfig and in-cluster configuration: contexts, credentials in files and inline,
// refusals with messages that name the entry, and service-account token rotation.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "operator/kubeclient/bearer_token.h"
#include "operator/kubeclient/kube_config.h"
#include "operator/kubeclient/resource_client.h"
#include "tests/operator/testserver/api_server.h"

namespace headroom::kubeclient {
namespace {

namespace fs = std::filesystem;
const std::string kDir = std::string(HEADROOM_SOURCE_DIR) + "/tests/operator/testdata/kubeconfig/";

// The fixture certificate files hold placeholder PEM text: these tests check what is
// read from where; TLS with real certificates is kubeclient_tls_test.
TEST(KubeconfigTest, CurrentContextWithTokenAndNamespace) {
  KubeConfig c = LoadKubeconfig(kDir + "token.yaml");
  EXPECT_EQ(c.server, "https://10.0.0.1:6443");
  EXPECT_EQ(c.token, "abc.def.ghi");
  EXPECT_EQ(c.ns, "training");
  EXPECT_NE(c.ca_pem.find("BEGIN CERTIFICATE"), std::string::npos) << "relative CA path resolved beside the file";
  EXPECT_NE(c.source.find("context dev"), std::string::npos);
}

TEST(KubeconfigTest, ExplicitContextWithClientCertificateFilesAndCaData) {
  KubeConfig c = LoadKubeconfig(kDir + "multi-context.yaml", "prod");
  EXPECT_EQ(c.server, "https://prod.example.com");
  EXPECT_EQ(c.ns, "ml");
  EXPECT_EQ(c.ca_pem, "-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n") << "base64 data decoded";
  EXPECT_NE(c.client_cert_pem.find("client"), std::string::npos);
  EXPECT_NE(c.client_key_pem.find("PRIVATE KEY"), std::string::npos);
  EXPECT_TRUE(c.token.empty());
}

TEST(KubeconfigTest, TokenFileIsRemembered) {
  KubeConfig c = LoadKubeconfig(kDir + "multi-context.yaml");
  EXPECT_EQ(c.ns, "default");
  EXPECT_EQ(c.token_file, kDir + "token.txt");
  BearerToken token(c.token, c.token_file, c.token_refresh);
  EXPECT_EQ(token.Get(), "file-token");
}

void ExpectError(const std::string& file, const std::string& context, const std::string& needle) {
  try {
    LoadKubeconfig(kDir + file, context);
    FAIL() << file << " must be refused";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << "names the file: " << e.what();
  }
}

TEST(KubeconfigTest, RefusalsNameTheProblem) {
  ExpectError("insecure.yaml", "", "clusters[name=lab].cluster.insecure-skip-tls-verify: refused");
  ExpectError("exec-plugin.yaml", "", "users[name=aws].user.exec: credential plugins are not supported");
  ExpectError("missing-cluster.yaml", "", "no entry named \"nowhere\" in clusters");
  ExpectError("cert-without-key.yaml", "", "client-certificate and client-key must be given together");
  ExpectError("token.yaml", "staging", "no entry named \"staging\" in contexts");
  ExpectError("does-not-exist.yaml", "", "cannot read file");
  EXPECT_THROW(ParseKubeconfig("clusters: [", "", "", "inline"), std::runtime_error);
}

TEST(KubeconfigTest, GarbageCertificatesFailWhenTheClientIsBuilt) {
  KubeConfig c = LoadKubeconfig(kDir + "multi-context.yaml", "prod");
  try {
    RestClient client(c);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot load TLS certificates"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("context prod"), std::string::npos) << e.what();
  }
}

TEST(KubeconfigTest, PlainHttpOnlyOnLoopback) {
  KubeConfig c;
  c.source = "test";
  c.server = "http://10.0.0.1:8080";
  try {
    RestClient client(c);
    FAIL() << "an unencrypted connection to another host must be refused";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("must start with https://"), std::string::npos) << e.what();
  }
  c.server = "http://127.0.0.1:8080";
  EXPECT_NO_THROW(RestClient{c});
}

class InClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("headroom-sa-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    Write("token", "token-1\n");
    Write("ca.crt", "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n");
    Write("namespace", "headroom-system");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    // Write-then-rename, as the kubelet's atomic writer replaces projected files.
    std::ofstream(dir_ / (name + ".tmp")) << text;
    fs::rename(dir_ / (name + ".tmp"), dir_ / name);
  }
  fs::path dir_;
};

TEST_F(InClusterTest, ReadsServiceAccountAndEnvironment) {
  InClusterOptions options;
  options.service_account_dir = dir_.string();
  options.host = "10.96.0.1";
  options.port = "443";
  EXPECT_TRUE(InCluster(options));
  KubeConfig c = LoadInClusterConfig(options);
  EXPECT_EQ(c.server, "https://10.96.0.1:443");
  EXPECT_EQ(c.ns, "headroom-system");
  EXPECT_EQ(c.token_file, (dir_ / "token").string());
  EXPECT_NE(c.ca_pem.find("BEGIN CERTIFICATE"), std::string::npos);
  options.host = "fd00::1";
  EXPECT_EQ(LoadInClusterConfig(options).server, "https://[fd00::1]:443");
}

TEST_F(InClusterTest, MissingEnvironmentIsExplained) {
  InClusterOptions options;
  options.service_account_dir = dir_.string();
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  try {
    LoadInClusterConfig(options);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("KUBERNETES_SERVICE_HOST"), std::string::npos);
  }
}

TEST_F(InClusterTest, TokenIsRereadWhenOldOrRejected) {
  auto now = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  BearerToken token("", (dir_ / "token").string(), std::chrono::seconds(60), [&] { return now; });
  EXPECT_EQ(token.Get(), "token-1");
  Write("token", "token-2");
  now += std::chrono::seconds(30);
  EXPECT_EQ(token.Get(), "token-1") << "cached while younger than the refresh period";
  now += std::chrono::seconds(31);
  EXPECT_EQ(token.Get(), "token-2") << "re-read once older than 60 s";
  Write("token", "token-3");
  token.Invalidate();
  EXPECT_EQ(token.Get(), "token-3") << "re-read at once after a 401";
  fs::remove(dir_ / "token");
  token.Invalidate();
  EXPECT_EQ(token.Get(), "token-3") << "a file missing mid-rotation keeps the last token";
}

TEST_F(InClusterTest, RotatedTokenRecoversFromA401WithoutFailingTheCall) {
  testserver::TestApiServerOptions server_options;
  server_options.required_token = "token-1";
  testserver::TestApiServer server(server_options);
  server.Start();
  KubeConfig config = server.ClientConfig();
  config.token.clear();
  config.token_file = (dir_ / "token").string();
  RestClient client(config);
  ResourceClient pods(client, resources::kPods);
  EXPECT_FALSE(pods.TryGet("ns1", "p").has_value());
  Write("token", "token-2");
  server.SetRequiredToken("token-2");  // the old token is no longer accepted
  EXPECT_FALSE(pods.TryGet("ns1", "p").has_value()) << "401, re-read, retried: the caller sees a normal answer";
  server.SetRequiredToken("token-9");
  try {
    pods.Get("ns1", "p");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.code(), 401);
  }
}

}  // namespace
}  // namespace headroom::kubeclient
