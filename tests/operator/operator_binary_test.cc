// The headroom-operator executable against the in-process API server (no kubelet: pods
// are created, not run): flags and --help, its /healthz /readyz /metrics, reconciling a
// job to its pod, a clean exit on SIGTERM, and leader election between two replicas
// (only the leader reconciles; the other takes over when it leaves).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "core/net/free_port.h"
#include "operator/trainingjob/http_scrape.h"
#include "tests/helpers/run_command.h"
#include "tests/operator/test_cluster.h"

namespace headroom::trainingjob::testing {
namespace {

const std::string kOperator = BinaryPath("headroom-operator");

class OperatorProcess {
 public:
  OperatorProcess(const std::vector<std::string>& args, const std::string& log) {
    std::fflush(nullptr);  // or the child repeats what the parent had buffered
    pid_ = ::fork();
    if (pid_ == 0) {
      std::freopen(log.c_str(), "a", stdout);
      std::freopen(log.c_str(), "a", stderr);
      std::vector<char*> argv{const_cast<char*>(kOperator.c_str())};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      std::_Exit(127);
    }
  }
  ~OperatorProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  // SIGTERM, then the exit status (-1 if it did not exit within the timeout).
  int Terminate(std::chrono::milliseconds timeout) {
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(20ms);
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
};

std::string WriteKubeconfig(const std::string& dir, const std::string& url) {
  const std::string path = dir + "/kubeconfig";
  std::ofstream(path) << "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster: {server: \"" << url
                      << "\"}\nusers:\n- name: op\n  user: {}\ncontexts:\n- name: test\n"
                      << "  context: {cluster: test, user: op, namespace: default}\ncurrent-context: test\n";
  return path;
}

std::optional<std::string> Get(int port, const std::string& path) { return HttpGet("127.0.0.1", port, path, 1s); }

TEST(OperatorBinary, HelpNamesTheFlags) {
  REQUIRE_BINARY(kOperator);
  const headroom::testing::CommandResult help = headroom::testing::RunCommand(kOperator + " --help");
  EXPECT_EQ(help.code, 0) << help.out;
  for (const char* flag : {"--kubeconfig", "--namespace", "--metrics-port", "--leader-elect"}) {
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag << " missing from:\n" << help.out;
  }
}

TEST(OperatorBinary, ReconcilesServesEndpointsAndStopsOnSigterm) {
  REQUIRE_BINARY(kOperator);
  Cluster::Options o;
  o.kubelet = false;
  Cluster c(o);
  const std::string kubeconfig = WriteKubeconfig(c.dir(), c.server().url());
  const int port = net::FreePort();
  OperatorProcess op({"--kubeconfig", kubeconfig, "--namespace", "default", "--metrics-port", std::to_string(port)},
                     c.dir() + "/operator.log");
  JobShape shape;
  shape.name = "bin";
  c.Create(JobObject(shape));
  ASSERT_TRUE(c.WaitUntil([&] { return c.PodsOf("bin").size() == 1; }, 20s));
  ASSERT_TRUE(c.WaitUntil([&] { return Get(port, "/readyz").has_value(); }, 10s)) << "ready once synced";
  EXPECT_TRUE(Get(port, "/healthz").has_value());
  ASSERT_TRUE(c.WaitUntil(
      [&] {
    auto m = Get(port, "/metrics");
    return m && m->find(R"(headroom_operator_jobs{phase="Pending"} 1)") != std::string::npos &&
           m->find("headroom_operator_reconcile_total") != std::string::npos;
      },
      10s))
      << Get(port, "/metrics").value_or("no /metrics");
  EXPECT_EQ(op.Terminate(15s), 0) << "SIGTERM: a clean exit";
}

TEST(OperatorBinary, OnlyTheLeaderReconcilesAndAFollowerTakesOver) {
  REQUIRE_BINARY(kOperator);
  Cluster::Options o;
  o.kubelet = false;
  Cluster c(o);
  const std::string kubeconfig = WriteKubeconfig(c.dir(), c.server().url());
  // Each replica's identity is its host name and pid (POD_NAME in a cluster).
  auto args = [&] {
    return std::vector<std::string>{"--kubeconfig",   kubeconfig, "--namespace",   "default",
                                    "--metrics-port", "0",        "--leader-elect"};
  };
  auto first = std::make_unique<OperatorProcess>(args(), c.dir() + "/a.log");
  kubeclient::RestClient client(c.server().ClientConfig());
  kubeclient::ResourceClient leases(client, kubeclient::resources::kLeases);
  std::string leader;
  ASSERT_TRUE(c.WaitUntil(
      [&] {
    auto lease = leases.TryGet("default", "headroom-operator");
    if (!lease) return false;
    leader = (*lease)["spec"].value("holderIdentity", "");
    return !leader.empty();
      },
      20s));
  OperatorProcess second(args(), c.dir() + "/b.log");
  JobShape shape;
  shape.name = "led";
  c.Create(JobObject(shape));
  ASSERT_TRUE(c.WaitUntil([&] { return c.PodsOf("led").size() == 1; }, 20s));

  auto read = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(read(c.dir() + "/b.log").find("leading as"), std::string::npos) << "the follower must not reconcile";
  EXPECT_EQ(first->Terminate(15s), 0);  // releases the lease on the way out
  std::string next;
  ASSERT_TRUE(c.WaitUntil(
      [&] {
    auto lease = leases.TryGet("default", "headroom-operator");
    next = lease ? (*lease)["spec"].value("holderIdentity", "") : "";
    return !next.empty() && next != leader;
      },
      20s))
      << "the second replica takes the released lease";
  shape.name = "led-2";
  c.Create(JobObject(shape));
  EXPECT_TRUE(c.WaitUntil([&] { return c.PodsOf("led-2").size() == 1; }, 20s)) << "the new leader reconciles";
  EXPECT_NE(read(c.dir() + "/b.log").find("leading as"), std::string::npos);
  EXPECT_EQ(c.PodsOf("led").size(), 1u);
}

}  // namespace
}  // namespace headroom::trainingjob::testing
