// operator_scale_bench: the operator's scale targets (one operator for a cluster's jobs
// must keep up and stay small), measured on the real
// headroom-operator process against the in-process test API server (no kubelet: pods are
// counted, not run), printed with their ratio to the target. Run at two sizes or more, so
// that growth faster than linear shows in one run:
//   1. N TrainingJobs reconciled to their pods: time from the operator's start to the
//      last pod existing. Target < 10 s at 500. Baseline in the same run: the same N pods
//      created by one client straight through the API (the floor any operator pays for
//      the HTTP round trips), as a ratio. Each job writes a ConfigMap, Service, pod,
//      status and Event, so ~5x is the floor; the ratio must not grow with N.
//   2. API writes when nothing changed: the operator restarted with --resync-seconds 0.5
//      picks every job up and resyncs each several times; writes counted by the server.
//      Target 0.
//   3. The operator's resident memory with N jobs (VmRSS of the process). Target < 64 MiB
//      at 500 jobs, < 256 MiB at 5,000.
// Usage: operator_scale_bench [jobs...]   (default: 500 2000; e.g. 500 5000 for the big run)
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

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

// CPU seconds (user + system) a process has used, from /proc/<pid>/stat.
double CpuSeconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::atoll(field.c_str());
    if (i == 15) stime = std::atoll(field.c_str());
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// CPU seconds this process (the test API server, in it) has used.
double OwnCpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
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

struct RunResult {
  int jobs = 0;
  size_t pods = 0;
  double reconcile_s = 0;
  double baseline_s = 0;
  int64_t resync_writes = 0;
  long rss_kib = 0;
  double operator_cpu_ms = 0;  // per job, first pass
  double server_cpu_ms = 0;    // per job, first pass (this process: the API server)
  bool ok = false;
};

RunResult RunOnce(const std::string& operator_bin, int jobs) {
  RunResult out;
  out.jobs = jobs;
  // Baseline: one client creating the same number of pods straight through the API.
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
    out.baseline_s = Seconds(Clock::now() - start);
  }

  testserver::TestApiServer server;
  server.Start();
  {
    kubeclient::RestClient client(server.ClientConfig("default"));
    kubeclient::ResourceClient tjs(client, kubeclient::resources::kTrainingJobs);
    for (int i = 0; i < jobs; ++i) tjs.Create("default", Job(i));
  }
  // Pods counted as the store creates them (a watch of its own), not by listing every pod
  // again and again: a poll that copies N pods under the store's lock would slow the very
  // server the operator is measured against, more the more pods there are.
  std::atomic<size_t> pods_created{0};
  const int64_t pod_watch = server.store().Subscribe(*server.store().Find("", "v1", "pods"), "default", "",
                                                     testserver::LabelSelector(), testserver::FieldSelector(),
                                                     [&pods_created](const std::string& type, const json&) {
    if (type == "ADDED") ++pods_created;
    return true;
  });
  char dir_pattern[] = "/tmp/headroom-bench-XXXXXX";
  const std::string dir = ::mkdtemp(dir_pattern);
  const std::string kubeconfig = dir + "/kubeconfig";
  std::ofstream(kubeconfig) << "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster: {server: \""
                            << server.url() << "\"}\nusers:\n- name: bench\n  user: {}\ncontexts:\n- name: test\n"
                            << "  context: {cluster: test, user: bench, namespace: default}\ncurrent-context: test\n";

  // The operator as deployed (its default resync period) for the first pass. A resync
  // re-checks every job, so a short one during the first pass would add work that grows
  // with N per period, over a pass whose length also grows with N.
  int metrics_port = net::FreePort();
  auto start_operator = [&](const char* resync_seconds) {
    const std::string metrics_port_arg = std::to_string(metrics_port);
    const pid_t child = ::fork();
    if (child == 0) {
      const std::string log = dir + "/operator.log";
      std::freopen(log.c_str(), "a", stdout);
      std::freopen(log.c_str(), "a", stderr);
      std::vector<const char*> args = {operator_bin.c_str(),    "--kubeconfig", kubeconfig.c_str(),
                                       "--namespace",           "default",      "--metrics-port",
                                       metrics_port_arg.c_str()};
      if (resync_seconds != nullptr) {
        args.push_back("--resync-seconds");
        args.push_back(resync_seconds);
      }
      args.push_back(nullptr);
      ::execv(operator_bin.c_str(), const_cast<char* const*>(args.data()));
      std::_Exit(127);
    }
    return child;
  };
  auto stop_operator = [](pid_t child) {
    ::kill(child, SIGTERM);
    int wstatus = 0;
    ::waitpid(child, &wstatus, 0);
    return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
  };
  const double give_up_s = 60 + jobs * 0.05;
  // Waits until no write reached the server for three half-second looks in a row.
  auto wait_quiet = [&](Clock::time_point since) {
    for (int quiet = 0; quiet < 3 && Seconds(Clock::now() - since) < give_up_s + 60;) {
      const int64_t w = server.write_requests();
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      quiet = server.write_requests() == w ? quiet + 1 : 0;
    }
  };

  const auto start = Clock::now();
  const double server_cpu_start = OwnCpuSeconds();
  pid_t pid = start_operator(nullptr);
  while (pods_created < static_cast<size_t>(jobs) && Seconds(Clock::now() - start) < give_up_s) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  out.pods = pods_created;
  out.reconcile_s = Seconds(Clock::now() - start);
  server.store().Unsubscribe(pod_watch);
  // Let the status writes and Events of the first pass land.
  wait_quiet(start);
  const int64_t first_pass_requests = server.requests();
  const int64_t first_pass_writes = server.write_requests();
  out.rss_kib = RssKiB(pid);
  // CPU per job over the first pass, which the machine's other load does not inflate the
  // way it does wall time: flat per job from size to size means linear work.
  out.operator_cpu_ms = CpuSeconds(pid) * 1000 / jobs;
  out.server_cpu_ms = (OwnCpuSeconds() - server_cpu_start) * 1000 / jobs;
  const int first_exit = stop_operator(pid);

  // A restarted operator with a short resync: it picks every job up, then re-checks each
  // several times; with nothing changed, none of that may write.
  const auto restart = Clock::now();
  metrics_port = net::FreePort();
  pid = start_operator("0.5");
  while (Reconciles(metrics_port) < jobs && Seconds(Clock::now() - restart) < give_up_s) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double pickup_s = Seconds(Clock::now() - restart);
  wait_quiet(restart);
  const int64_t writes_before = server.write_requests();
  const int64_t pickup_writes = writes_before - first_pass_writes;
  const int64_t requests_before = server.requests();
  const double reconciles_before = Reconciles(metrics_port);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // ~5 resyncs of every job
  out.resync_writes = server.write_requests() - writes_before + pickup_writes;
  const double resync_reconciles = Reconciles(metrics_port) - reconciles_before;
  const int64_t resync_requests = server.requests() - requests_before;
  const int second_exit = stop_operator(pid);

  std::printf("operator_scale_bench: %d TrainingJobs, test API server, no kubelet\n", jobs);
  std::printf("  pods created:              %zu of %d\n", out.pods, jobs);
  std::printf("  reconciled to pods in:     %.2f s   (target < 10 s at 500 jobs)\n", out.reconcile_s);
  std::printf("  baseline, bare pod creates: %.2f s   (operator / baseline = %.2fx; it also writes a\n"
              "                             ConfigMap, Service, status and Event per job)\n",
              out.baseline_s, out.reconcile_s / out.baseline_s);
  std::printf("  API requests until quiet:  %.2f per job, of them writes %.2f per job (one is the job's create)\n",
              static_cast<double>(first_pass_requests) / jobs, static_cast<double>(first_pass_writes) / jobs);
  std::printf("  operator RSS with %d jobs: %.1f MiB   (%.1f KiB per job)\n", jobs, out.rss_kib / 1024.0,
              static_cast<double>(out.rss_kib) / jobs);
  std::printf("  restarted with --resync-seconds 0.5: every job picked up in %.2f s, with %lld writes (target 0)\n",
              pickup_s, static_cast<long long>(pickup_writes));
  std::printf("  API writes over the next ~5 resyncs of every job with nothing changed: %lld (target 0); "
              "requests (reads, incl. watches) meanwhile: %lld\n",
              static_cast<long long>(out.resync_writes - pickup_writes), static_cast<long long>(resync_requests));
  std::printf("  reconciles in that window: %.0f (%.1f per job: the resyncs did happen)\n", resync_reconciles,
              resync_reconciles / jobs);
  std::printf("  operator exit on SIGTERM: %d, %d\n", first_exit, second_exit);
  std::printf("  configmaps %zu, services %zu, events %zu\n", Count(server, "configmaps"), Count(server, "services"),
              Count(server, "events"));
  std::fflush(stdout);
  std::string cleanup = "rm -rf " + dir;
  (void)std::system(cleanup.c_str());
  out.ok = out.pods == static_cast<size_t>(jobs) && out.resync_writes == 0 && first_exit == 0 && second_exit == 0;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) {
    const int n = std::atoi(argv[i]);
    if (n <= 0) {
      std::fprintf(stderr, "operator_scale_bench: argument %d: \"%s\" is not a positive number of jobs\n", i, argv[i]);
      return 2;
    }
    sizes.push_back(n);
  }
  if (sizes.empty()) sizes = {500, 2000};
  const std::string operator_bin = std::string(HEADROOM_BINARY_DIR) + "/bin/headroom-operator";
  if (::access(operator_bin.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "%s is not built\n", operator_bin.c_str());
    return 2;
  }
  std::vector<RunResult> runs;
  for (int n : sizes) runs.push_back(RunOnce(operator_bin, n));

  // The growth in one table: a ratio that rises with N means some step costs more per job
  // the more jobs there are.
  std::printf("\nscale (operator time / bare pod creates of the same run; goal: flat, at most ~6x):\n");
  std::printf("  %7s %10s %10s %8s %10s %12s %16s %14s\n", "jobs", "operator", "baseline", "ratio", "RSS MiB",
              "resync wr.", "op. CPU ms/job", "srv CPU ms/job");
  bool ok = true;
  for (const RunResult& r : runs) {
    std::printf("  %7d %9.2fs %9.2fs %7.2fx %10.1f %12lld %16.2f %14.2f%s\n", r.jobs, r.reconcile_s, r.baseline_s,
                r.reconcile_s / r.baseline_s, r.rss_kib / 1024.0, static_cast<long long>(r.resync_writes),
                r.operator_cpu_ms, r.server_cpu_ms, r.ok ? "" : "  (incomplete)");
    ok = ok && r.ok;
  }
  if (runs.size() >= 2) {
    const RunResult& a = runs.front();
    const RunResult& b = runs.back();
    std::printf("  ratio growth %d -> %d jobs: %.2fx (1.00 = linear)\n", a.jobs, b.jobs,
                (b.reconcile_s / b.baseline_s) / (a.reconcile_s / a.baseline_s));
  }
  return ok ? 0 : 1;
}
