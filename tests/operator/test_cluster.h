// Shared by the trainingjob_* and operator_* tests: an in-process cluster (test API server with
// the headroom CRD, a test kubelet running pods as local processes) and the operator's
// TrainingJobController against it, with pods pointed at a local worker binary.
//
// The test kubelet has no images and mounts no volumes, so the pod hook does what the
// image and the ConfigMap volume do on a real node: it runs the worker binary from this
// build, hands it the generation's job YAML as a file (the ConfigMap's exact content,
// spec::ToYaml of the launch's job), a checkpoint directory shared by every generation
// (the PVC), and, because every test pod shares 127.0.0.1, its own metrics port (in the
// prometheus.io/port annotation the operator scrapes by) and rendezvous port.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/net/free_port.h"
#include "core/spec/training_job.h"
#include "operator/trainingjob/controller.h"
#include "operator/kubeclient/resource_client.h"
#include "operator/manifests/children.h"
#include "tests/helpers/eventually.h"
#include "tests/operator/testserver/api_server.h"
#include "tests/operator/testserver/test_kubelet.h"

namespace headroom::trainingjob::testing {

using nlohmann::json;
using namespace std::chrono_literals;

inline std::string BinaryPath(const std::string& name) { return std::string(HEADROOM_BINARY_DIR) + "/bin/" + name; }
inline bool Exists(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

// A TrainingJob object as `kubectl apply` sends it (JSON), small enough for the fake worker.
struct JobShape {
  std::string name = "job";
  int workers = 1;
  int max_workers = 4;
  int steps = 12;
  int checkpoint_every = 5;
  std::string memory = "256Mi";
  int max_restarts = 5;
  std::string leak = "0";
  int ranks_per_pod = 1;
};

inline json JobObject(const JobShape& s) {
  return json{{"apiVersion", "headroom.dev/v1alpha1"},
              {"kind", "TrainingJob"},
              {"metadata", {{"name", s.name}}},
              {"spec",
               {{"workers", s.workers},
                {"ranksPerPod", s.ranks_per_pod},
                {"minWorkers", 1},
                {"maxWorkers", s.max_workers},
                {"resources", {{"cpu", "1"}, {"memory", s.memory}, {"gpus", 0}}},
                {"model", {{"preset", "tiny"}}},
                {"task", {{"name", "reverse"}, {"digits", 3}, {"seed", 1}}},
                {"grpo",
                 {{"steps", s.steps},
                  {"promptsPerStep", 8},
                  {"groupSize", 4},
                  {"maxPromptLength", 8},
                  {"maxResponseLength", 6},
                  {"microBatchSize", 32},
                  {"klCoef", 0.0}}},
                {"sharding", {{"stage", 1}}},
                {"checkpoint", {{"everySteps", s.checkpoint_every}, {"keep", 2}}},
                {"memoryGuard",
                 {{"enabled", true}, {"hostThreshold", 0.85}, {"horizonSteps", 2}, {"maxRestarts", s.max_restarts}}},
                {"debug", {{"hostLeakBytesPerStep", s.leak}}}}}};
}

class Cluster {
 public:
  struct Options {
    std::string worker = BinaryPath("headroom-fake-worker");
    std::vector<std::pair<std::string, std::string>> worker_env;  // extra env on every pod
    std::chrono::milliseconds resync{30000};
    std::chrono::milliseconds requeue{300};
    bool kubelet = true;
    int reconcile_workers = 4;
  };

  explicit Cluster(Options options) : options_(std::move(options)) {
    std::string pattern = (std::filesystem::temp_directory_path() / "headroom-k8s-XXXXXX").string();
    dir_ = ::mkdtemp(pattern.data());
    server_.Start();
    client_ = std::make_unique<kubeclient::RestClient>(server_.ClientConfig("default"));
    if (options_.kubelet) {
      testserver::TestKubelet::Options k;
      k.work_dir = dir_ + "/kubelet";
      kubelet_ = std::make_unique<testserver::TestKubelet>(server_.ClientConfig(), k);
      kubelet_->Start();
    }
  }
  ~Cluster() {
    StopOperator();
    if (kubelet_) kubelet_->Stop();
    server_.Stop();
    // HEADROOM_K8S_KEEP=1 keeps the pods' logs and checkpoints for a post-mortem.
    if (std::getenv("HEADROOM_K8S_KEEP")) {
      std::cerr << "kept " << dir_ << "\n";
    } else {
      std::filesystem::remove_all(dir_);
    }
  }

  TrainingJobControllerOptions OperatorOptions() {
    TrainingJobControllerOptions o;
    o.ns = "default";
    o.workers = options_.reconcile_workers;
    o.running_requeue = options_.requeue;
    o.resync_period = options_.resync;
    o.reconciler.drain_grace = 10s;
    o.reconciler.peer_exit_timeout = 10s;
    o.pods.customize_pod = [this](json& pod, const runtime::LaunchRequest& launch, int rank) {
      CustomizePod(pod, launch, rank);
    };
    return o;
  }

  void StartOperator() {
    metrics_ = std::make_shared<controllerkit::OperatorMetrics>();
    operator_ = std::make_unique<TrainingJobController>(*client_, OperatorOptions(), metrics_);
    operator_->StartInformers();
    ASSERT_TRUE(operator_->WaitForSync(10s));
    operator_->StartReconciling();
  }
  void StopOperator() {
    if (operator_) operator_->Stop(5s);
    operator_.reset();
  }

  kubeclient::ResourceClient Jobs() {
    return kubeclient::ResourceClient(*client_, kubeclient::resources::kTrainingJobs);
  }
  kubeclient::ResourceClient Pods() { return kubeclient::ResourceClient(*client_, kubeclient::resources::kPods); }
  kubeclient::ResourceClient Services() {
    return kubeclient::ResourceClient(*client_, kubeclient::resources::kServices);
  }
  kubeclient::ResourceClient ConfigMaps() {
    return kubeclient::ResourceClient(*client_, kubeclient::resources::kConfigMaps);
  }
  kubeclient::ResourceClient Events() { return kubeclient::ResourceClient(*client_, kubeclient::resources::kEvents); }

  json Create(const json& job) { return Jobs().Create("default", job); }
  json Job(const std::string& name) { return Jobs().Get("default", name); }
  json Status(const std::string& name) { return Job(name).value("status", json::object()); }

  // Polls until pred(job) holds; fails the test with the last status otherwise.
  bool WaitForJob(const std::string& name, const std::function<bool(const json&)>& pred,
                  std::chrono::milliseconds timeout, const std::string& what) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    json job;
    while (std::chrono::steady_clock::now() < deadline) {
      try {
        job = Job(name);
        if (pred(job)) return true;
      } catch (const std::exception&) {
      }
      std::this_thread::sleep_for(50ms);
    }
    std::string events;
    try {
      events = EventMessages(name);
    } catch (const std::exception& e) {
      events = std::string("(unreadable: ") + e.what() + ")";
    }
    ADD_FAILURE() << "timed out waiting for " << what << "; job: " << job.value("status", json()).dump()
                  << "\nits events:\n"
                  << events;
    return false;
  }
  bool WaitForPhase(const std::string& name, const std::string& phase, std::chrono::milliseconds timeout) {
    return WaitForJob(
        name, [&](const json& j) { return j.contains("status") && j["status"].value("phase", "") == phase; }, timeout,
        "phase " + phase);
  }
  template <typename Pred>
  bool WaitUntil(Pred pred, std::chrono::milliseconds timeout) {
    // A read the API server refuses mid-test (an injected fault) means "not yet".
    auto holds = [&] {
      try {
        return static_cast<bool>(pred());
      } catch (const std::exception&) {
        return false;
      }
    };
    return headroom::testing::Eventually(holds, timeout, 50ms);
  }

  std::vector<json> PodsOf(const std::string& job) {
    kubeclient::ListOptions o;
    o.label_selector = std::string(manifests::kLabelJobName) + "=" + job;
    return Pods().List("default", o)["items"].get<std::vector<json>>();
  }
  // The job's Events, oldest first.
  std::vector<json> EventsOf(const std::string& job) {
    std::vector<json> got;
    const json list = Events().List("default");  // named: a range-for over a temporary's member dangles
    for (const json& e : list["items"]) {
      if (e["involvedObject"].value("name", "") == job) got.push_back(e);
    }
    auto version = [](const json& e) { return std::stoll(e["metadata"].value("resourceVersion", "0")); };
    std::sort(got.begin(), got.end(), [&](const json& a, const json& b) { return version(a) < version(b); });
    return got;
  }
  std::vector<std::string> EventReasons(const std::string& job) {
    std::vector<std::string> reasons;
    for (const json& e : EventsOf(job)) reasons.push_back(e.value("reason", ""));
    return reasons;
  }
  // "Reason: message" per line, oldest first.
  std::string EventMessages(const std::string& job) {
    std::string all;
    for (const json& e : EventsOf(job)) all += e.value("reason", "") + ": " + e.value("message", "") + "\n";
    return all;
  }

  testserver::TestApiServer& server() { return server_; }
  TrainingJobController& op() { return *operator_; }
  controllerkit::OperatorMetrics& metrics() { return *metrics_; }
  const std::string& dir() const { return dir_; }

 private:
  void CustomizePod(json& pod, const runtime::LaunchRequest& launch, int rank) {
    const std::string job = launch.job.metadata.name;
    std::string spec_file;
    int rendezvous = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const std::string key = job + "/" + std::to_string(launch.generation);
      if (!rendezvous_.count(key)) rendezvous_[key] = PortsLocked(1);
      rendezvous = rendezvous_[key];
      std::filesystem::create_directories(dir_ + "/jobs/" + job);
      spec_file = dir_ + "/jobs/" + job + "/job-g" + std::to_string(launch.generation) + ".yaml";
      std::ofstream(spec_file) << spec::ToYaml(launch.job);
    }
    json& c = pod["spec"]["containers"][0];
    // Every pod here shares one network: a launcher's ranks serve the ports right above
    // its own, which no other pod may be given.
    const bool launcher = !c["args"].empty() && c["args"][0] == "launch";
    const int metrics = Ports(launcher ? 1 + launch.job.spec.ranks_per_pod : 1);
    c["command"] = json::array({options_.worker});
    const json worker_args =
        json::array({"--job", spec_file, "--checkpoint-dir", dir_ + "/jobs/" + job + "/checkpoints"});
    if (launcher) {
      // A pod of several ranks: the operator's launcher line, on this machine's paths and
      // ports (its ranks serve metrics + 1 + LOCAL_RANK).
      json args = json::array();
      for (size_t i = 0; i < c["args"].size() && c["args"][i] != "--"; ++i) {
        const bool port = i > 0 && c["args"][i - 1] == "--metrics-port";
        args.push_back(port ? json(std::to_string(metrics)) : c["args"][i]);
      }
      args.push_back("--");
      for (const json& a : worker_args) args.push_back(a);
      c["args"] = std::move(args);
    } else {
      c["args"] = worker_args;
      c["args"].push_back("--metrics-port");
      c["args"].push_back(std::to_string(metrics));
    }
    for (json& e : c["env"]) {
      if (e["name"] == "MASTER_ADDR") e["value"] = "127.0.0.1";
      if (e["name"] == "MASTER_PORT") e["value"] = std::to_string(rendezvous);
    }
    for (const auto& [k, v] : options_.worker_env) c["env"].push_back({{"name", k}, {"value", v}});
    c["env"].push_back({{"name", "FAKE_ONCE_DIR"}, {"value", dir_ + "/jobs/" + job}});
    pod["metadata"]["annotations"][manifests::kMetricsPortAnnotation] = std::to_string(metrics);
    (void)rank;
  }

  // `span` consecutive ports from a free one, none handed out before.
  int Ports(int span) {
    std::lock_guard<std::mutex> lock(mu_);
    return PortsLocked(span);
  }
  int PortsLocked(int span) {
    for (;;) {
      const int first = net::FreePorts(span);
      bool taken = false;
      for (int p = first; p < first + span; ++p) taken = taken || ports_.count(p);
      if (taken) continue;
      for (int p = first; p < first + span; ++p) ports_.insert(p);
      return first;
    }
  }

  Options options_;
  std::string dir_;
  testserver::TestApiServer server_;
  std::unique_ptr<kubeclient::RestClient> client_;
  std::unique_ptr<testserver::TestKubelet> kubelet_;
  std::shared_ptr<controllerkit::OperatorMetrics> metrics_;
  std::unique_ptr<TrainingJobController> operator_;
  std::mutex mu_;
  std::map<std::string, int> rendezvous_;
  std::set<int> ports_;  // handed out to pods (metrics, rendezvous)
};

#define REQUIRE_BINARY(path)                                                                      \
  do {                                                                                            \
    if (!::headroom::trainingjob::testing::Exists(path)) GTEST_SKIP() << path << " is not built"; \
  } while (0)

}  // namespace headroom::trainingjob::testing
