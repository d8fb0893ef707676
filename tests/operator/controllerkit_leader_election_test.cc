// Leader election on a Lease in the test API server, with short timings
// (lease 1.5 s, renew deadline 1 s, retry 0.2 s): one leader at a time, takeover when
// the leader stops renewing, immediate handover when it releases on shutdown.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "operator/controllerkit/leader_election.h"
#include "tests/helpers/eventually.h"
#include "tests/operator/testserver/api_server.h"

namespace headroom::controllerkit {
namespace {

using headroom::testing::Eventually;

using nlohmann::json;
using namespace std::chrono_literals;
using testserver::TestApiServer;

struct Candidate {
  std::string id;
  std::unique_ptr<kubeclient::RestClient> client;
  std::unique_ptr<LeaderElector> elector;
  std::thread thread;
  std::atomic<bool> leading{false};
  std::atomic<bool> returned{false};
  std::chrono::steady_clock::time_point started_at{};

  void Run() {
    thread = std::thread([this] {
      elector->Run();
      returned = true;
    });
  }
  ~Candidate() {
    if (elector) elector->Stop();
    if (thread.joinable()) thread.join();
  }
};

class LeaderElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testserver::TestApiServerOptions options;
    options.required_token = "token-a";
    server_ = std::make_unique<TestApiServer>(options);
    server_->Start();
    server_->SetAcceptedTokens({"token-a", "token-b"});
  }

  std::unique_ptr<Candidate> Make(const std::string& id, const std::string& token) {
    auto c = std::make_unique<Candidate>();
    c->id = id;
    kubeclient::KubeConfig config = server_->ClientConfig("ns1");
    config.token = token;
    kubeclient::RestClientOptions client_options;
    client_options.max_retries = 0;
    client_options.request_timeout = 500ms;
    c->client = std::make_unique<kubeclient::RestClient>(config, client_options);
    LeaderElectionConfig le;
    le.ns = "ns1";
    le.lease_name = "headroom-operator";
    le.identity = id;
    le.lease_duration = 1500ms;
    le.renew_deadline = 1000ms;
    le.retry_period = 200ms;
    Candidate* raw = c.get();
    le.on_started_leading = [this, raw] {
      raw->started_at = std::chrono::steady_clock::now();
      raw->leading = true;
      if (++leaders_ > 1) overlap_ = true;
    };
    le.on_stopped_leading = [this, raw] {
      if (raw->leading.exchange(false)) --leaders_;
    };
    c->elector =
        std::make_unique<LeaderElector>(kubeclient::ResourceClient(*c->client, kubeclient::resources::kLeases), le);
    return c;
  }

  json Lease() {
    kubeclient::RestClient reader(server_->ClientConfig("ns1"));
    return kubeclient::ResourceClient(reader, kubeclient::resources::kLeases).Get("ns1", "headroom-operator");
  }

  std::unique_ptr<TestApiServer> server_;
  std::atomic<int> leaders_{0};
  std::atomic<bool> overlap_{false};
};

TEST_F(LeaderElectionTest, ValidatesTimings) {
  LeaderElectionConfig le;
  le.ns = "ns1";
  le.lease_name = "l";
  le.identity = "me";
  le.renew_deadline = le.lease_duration;
  kubeclient::RestClient client(server_->ClientConfig());
  EXPECT_THROW(LeaderElector(kubeclient::ResourceClient(client, kubeclient::resources::kLeases), le),
               std::invalid_argument);
}

TEST_F(LeaderElectionTest, OneLeadsTheOtherTakesOverWhenRenewalsStop) {
  auto a = Make("candidate-a", "token-a");
  a->Run();
  ASSERT_TRUE(Eventually([&] { return a->leading.load(); }, 3s));
  auto b = Make("candidate-b", "token-b");
  b->Run();
  std::this_thread::sleep_for(1s);
  EXPECT_TRUE(a->leading);
  EXPECT_FALSE(b->leading) << "the lease is held and renewed: the second candidate waits";
  EXPECT_EQ(b->elector->Leader(), "candidate-a");

  json lease = Lease();
  EXPECT_EQ(lease["spec"]["holderIdentity"], "candidate-a");
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 2) << "1.5 s rounded up to whole seconds";
  const std::string renew = lease["spec"]["renewTime"];
  EXPECT_EQ(renew.size(), std::string("2026-01-02T03:04:05.123456Z").size()) << "MicroTime: " << renew;
  EXPECT_NO_THROW(kubeclient::ParseTime(renew));

  // a's credentials are revoked: it can no longer renew, gives up after the renew
  // deadline, and b takes over once the lease has not been renewed for its duration.
  const auto cut = std::chrono::steady_clock::now();
  server_->SetAcceptedTokens({"token-b"});
  ASSERT_TRUE(Eventually([&] { return !a->leading.load(); }, 3s));
  EXPECT_TRUE(Eventually([&] { return a->returned.load(); }, 1s)) << "Run returns after losing the lease";
  ASSERT_TRUE(Eventually([&] { return b->leading.load(); }, 5s));
  EXPECT_GE(b->started_at - cut, 1300ms) << "b waited for the lease to expire";
  EXPECT_FALSE(overlap_) << "never two leaders at once";
  lease = Lease();
  EXPECT_EQ(lease["spec"]["holderIdentity"], "candidate-b");
  EXPECT_EQ(lease["spec"]["leaseTransitions"], 1);
}

TEST_F(LeaderElectionTest, GracefulStopReleasesTheLeaseForAQuickHandover) {
  auto a = Make("candidate-a", "token-a");
  auto b = Make("candidate-b", "token-b");
  a->Run();
  ASSERT_TRUE(Eventually([&] { return a->leading.load(); }, 3s));
  b->Run();
  std::this_thread::sleep_for(300ms);
  const auto stop = std::chrono::steady_clock::now();
  a->elector->Stop();
  a->thread.join();
  EXPECT_FALSE(a->leading);
  ASSERT_TRUE(Eventually([&] { return b->leading.load(); }, 3s));
  EXPECT_LT(b->started_at - stop, 1000ms) << "a released the lease; b did not wait for it to expire";
  EXPECT_FALSE(overlap_);
}

}  // namespace
}  // namespace headroom::controllerkit
