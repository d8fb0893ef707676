// operator_scale_bench: the operator's scale targets (one operator for a cluster's jobs
// must keep up and stay small), measured on the real
// headroom-operator process against the in-process test API server (no kubelet: pods are
// counted, not run), printed with their ratio to the target.
//   1. N TrainingJobs (default 500) reconciled to their pods: time from the operator's
//      start to the last pod existing. Target < 10 s. Baseline in the same run: the same
//      N pods created by one client straight through the API (the floor any operator
//      pays for the HTTP round trips), as a ratio.
//   2. API writes per resync when nothing changed: every job resynced several times
//      (--resync-seconds 0.5); writes counted by the server. Target 0.
//   3. The operator's resident memory with N jobs (VmRSS of the process). Target < 64 MiB.
// Usage: operator_scale_bench [jobs=500]
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "core/metrics/prometheus_text.h"
#include "core/net/free_port.h"
#include "operator/trainingjob/http_scrape.h"
#include "operator/kubeclient/resource_client.h"
#include "operator/manifests/children.h"
#include "tests/operator/testserver/api_server.h"

using namespace headroom;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

json Job(int i) {
  return json{{"apiVersion", "headroom.dev/v1alpha1"},
              {"kind", "TrainingJob"},
              {"metadata", {{"name", "job-" + std::to_string(i)}}},
              {"spec",
               {{"workers", 1},
                {"resources", {{"cpu", "1"}, {"memory", "1Gi"}}},
                {"grpo", {{"steps", 10}, {"promptsPerStep", 8}, {"groupSize", 4}}}}}};
}

long RssKiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

size_t Count(testserver::TestApiServer& server, const std::string& plural, const std::string& group = "",
             const std::string& version = "v1") {
  const testserver::ResourceInfo* r = server.store().Find(group, version, plural);
  return server.store()
      .List(*r, "default", testserver::LabelSelector(), testserver::FieldSelector(), 0, "")["items"]
      .size();
}

// Reconciles the operator has done so far, from its own /metrics.
double Reconciles(int port) {
  std::optional<std::string> page = trainingjob::HttpGet("127.0.0.1", port, "/metrics", std::chrono::seconds(2));
  double total = 0;
  if (!page) return -1;
  for (const metrics::MetricSample& s : metrics::ParsePrometheusText(*page)) {
    if (s.name == "headroom_operator_reconcile_total") total += s.value;
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  const int jobs = argc > 1 ? std::atoi(argv[1]) : 500;
  const std::string operator_bin = std::string(HEADROOM_BINARY_DIR) + "/bin/headroom-operator";
  if (::access(operator_bin.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "%s is not built\n", operator_bin.c_str());
    return 2;
  }

  // Baseline: one client creating the same number of pods straight through the API.
  double baseline_s = 0;
  {
    testserver::TestApiServer server;
    server.Start();
    kubeclient::RestClient client(server.ClientConfig("default"));
    kubeclient::ResourceClient pods(client, kubeclient::resources::kPods);
    spec::ParseResult parsed = spec::ParseTrainingJobJson(Job(0));
    manifests::WorkerGeneration gen{*parsed.job, 1, ""};
    const auto start = Clock::now();
    for (int i = 0; i < jobs; ++i) {
      gen.job.metadata.name = "job-" + std::to_string(i);
      pods.Create("default", manifests::BuildWorkerPod(gen, 0, "default"));
    }
    baseline_s = Seconds(Clock::now() - start);
  }

  testserver::TestApiServer server;
  server.Start();
  {
    kubeclient::RestClient client(server.ClientConfig("default"));
    kubeclient::ResourceClient tjs(client, kubeclient::resources::kTrainingJobs);
    for (int i = 0; i < jobs; ++i) tjs.Create("default", Job(i));
  }
  char dir_pattern[] = "/tmp/headroom-bench-XXXXXX";
  const std::string dir = ::mkdtemp(dir_pattern);
  const std::string kubeconfig = dir + "/kubeconfig";
  std::ofstream(kubeconfig) << "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster: {server: \""
                            << server.url() << "\"}\nusers:\n- name: bench\n  user: {}\ncontexts:\n- name: test\n"
                            << "  context: {cluster: test, user: bench, namespace: default}\ncurrent-context: test\n";

  const int metrics_port = net::FreePort();
  const std::string metrics_port_arg = std::to_string(metrics_port);
  const auto start = Clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string log = dir + "/operator.log";
    std::freopen(log.c_str(), "w", stdout);
    std::freopen(log.c_str(), "a", stderr);
    ::execl(operator_bin.c_str(), operator_bin.c_str(), "--kubeconfig", kubeconfig.c_str(), "--namespace", "default",
            "--metrics-port", metrics_port_arg.c_str(), "--resync-seconds", "0.5", static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  size_t pods = 0;
  while ((pods = Count(server, "pods")) < static_cast<size_t>(jobs) && Seconds(Clock::now() - start) < 120) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double reconcile_s = Seconds(Clock::now() - start);
  // Let the status writes and Events of the first pass land, then count writes over
  // several resyncs of every job.
  int64_t writes_before = 0;
  for (int quiet = 0; quiet < 3;) {
    const int64_t w = server.write_requests();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    quiet = server.write_requests() == w ? quiet + 1 : 0;
    writes_before = server.write_requests();
    if (Seconds(Clock::now() - start) > 180) break;
  }
  const int64_t requests_before = server.requests();
  const double reconciles_before = Reconciles(metrics_port);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // ~5 resyncs of every job
  const int64_t resync_writes = server.write_requests() - writes_before;
  const double resync_reconciles = Reconciles(metrics_port) - reconciles_before;
  const int64_t resync_requests = server.requests() - requests_before;
  const long rss_kib = RssKiB(pid);
  ::kill(pid, SIGTERM);
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);

  std::printf("operator_scale_bench: %d TrainingJobs, test API server, no kubelet\n", jobs);
  std::printf("  pods created:              %zu of %d\n", pods, jobs);
  std::printf("  reconciled to pods in:     %.2f s   (target < 10 s: %.2fx headroom)\n", reconcile_s,
              10.0 / reconcile_s);
  std::printf("  baseline, bare pod creates: %.2f s   (operator / baseline = %.2fx; it also writes a\n"
              "                             ConfigMap, Service, status and Event per job)\n",
              baseline_s, reconcile_s / baseline_s);
  std::printf("  API writes over ~5 resyncs of every job with nothing changed: %lld (target 0); "
              "requests (reads, incl. watches) meanwhile: %lld\n",
              static_cast<long long>(resync_writes), static_cast<long long>(resync_requests));
  std::printf("  reconciles in that window: %.0f (%.1f per job: the resyncs did happen)\n", resync_reconciles,
              resync_reconciles / jobs);
  std::printf("  operator RSS with %d jobs: %.1f MiB   (target < 64 MiB: %.2fx headroom)\n", jobs, rss_kib / 1024.0,
              64.0 * 1024 / rss_kib);
  std::printf("  operator exit on SIGTERM: %d\n", WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
  std::printf("  configmaps %zu, services %zu, events %zu\n", Count(server, "configmaps"), Count(server, "services"),
              Count(server, "events"));
  std::string cleanup = "rm -rf " + dir;
  (void)std::system(cleanup.c_str());
  return pods == static_cast<size_t>(jobs) && resync_writes == 0 ? 0 : 1;
}
