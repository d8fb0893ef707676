// headroom-operator: reconciles TrainingJobs into guarded worker pods (design.md).
//
//   headroom-operator [--kubeconfig FILE] [--namespace NS] [--metrics-port N] [--leader-elect]
//
// Config: --kubeconfig, else in-cluster (service account) when running in a pod, else
// $KUBECONFIG / ~/.kube/config. Informers start at once (a follower keeps warm caches);
// only the leader reconciles when --leader-elect is given. /metrics, /healthz and /readyz
// on --metrics-port. SIGTERM/SIGINT: stop taking work, let reconciles in flight finish
// (10 s), release the lease, exit 0. Losing the lease exits 1 so the pod restarts with
// fresh state, as client-go's leader election recommends.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>

#include "operator/controller/leader_election.h"
#include "operator/controller/operator_endpoints.h"
#include "operator/controller/operator_metrics.h"
#include "operator/controller/shutdown_signal.h"
#include "operator/k8s/trainingjob_controller.h"
#include "operator/kube/kube_config.h"
#include "operator/kube/resource_client.h"
#include "operator/kube/rest_client.h"

namespace {

std::string Identity() {
  if (const char* pod = std::getenv("POD_NAME")) return pod;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + "-" + std::to_string(::getpid());
}

}  // namespace

int main(int argc, char** argv) {
  using namespace headroom;
  CLI::App app{"headroom-operator: reconciles TrainingJobs (headroom.dev/v1alpha1) into guarded worker pods"};
  std::string kubeconfig;
  std::string ns;
  int metrics_port = 8080;
  bool leader_elect = false;
  std::string lease_name = "headroom-operator";
  int reconcile_workers = 4;
  double resync_seconds = 30;
  app.add_option("--kubeconfig", kubeconfig, "kubeconfig file (default: in-cluster config, else $KUBECONFIG or ~/.kube/config)");
  app.add_option("--namespace", ns, "watch only this namespace (default: every namespace)");
  app.add_option("--metrics-port", metrics_port, "port of /metrics, /healthz and /readyz (0 = any free port)")
      ->check(CLI::Range(0, 65535));
  app.add_flag("--leader-elect", leader_elect, "elect one active replica on a coordination.k8s.io Lease");
  app.add_option("--lease-name", lease_name, "the Lease's name (with --leader-elect)");
  app.add_option("--workers", reconcile_workers, "reconcile threads")->check(CLI::Range(1, 64));
  app.add_option("--resync-seconds", resync_seconds, "re-check every job this often even when nothing changed")
      ->check(CLI::Range(0.1, 86400.0));
  app.set_version_flag("--version", "headroom-operator 0.1.0");
  CLI11_PARSE(app, argc, argv);

  controller::ShutdownSignal& shutdown = controller::ShutdownSignal::Install();
  try {
    kube::KubeConfig config = !kubeconfig.empty()    ? kube::LoadKubeconfig(kubeconfig)
                              : kube::InCluster()    ? kube::LoadInClusterConfig()
                                                     : kube::LoadKubeconfig("");
    spdlog::info("API server {} ({})", config.server, config.source);
    kube::RestClient client(config);
    auto metrics = std::make_shared<controller::OperatorMetrics>();

    k8s::TrainingJobControllerOptions options;
    options.ns = ns;
    options.workers = reconcile_workers;
    options.resync_period = std::chrono::milliseconds(static_cast<int64_t>(resync_seconds * 1000));
    k8s::TrainingJobController jobs(client, options, metrics);

    std::atomic<bool> leading{!leader_elect};
    controller::OperatorEndpoints endpoints("0.0.0.0", metrics_port, metrics);
    endpoints.AddHealthCheck("shutdown", [&](std::string* detail) {
      *detail = shutdown.requested() ? "shutting down" : "ok";
      return true;
    });
    endpoints.AddReadinessCheck("informers", [&](std::string* detail) {
      const bool synced = jobs.HasSynced();
      *detail = synced ? "synced" : "waiting for the first list";
      return synced;
    });
    endpoints.AddReadinessInfo("leader-election", [&] {
      return !leader_elect ? std::string("disabled") : leading ? std::string("leading") : std::string("following");
    });
    endpoints.Start();
    spdlog::info("/metrics /healthz /readyz on port {}", endpoints.port());

    jobs.StartInformers();
    std::unique_ptr<controller::LeaderElector> elector;
    std::thread election;
    std::atomic<bool> lost{false};
    if (leader_elect) {
      controller::LeaderElectionConfig le;
      le.ns = ns.empty() ? config.ns : ns;
      le.lease_name = lease_name;
      le.identity = Identity();
      le.on_started_leading = [&] {
        spdlog::info("leading as {}: reconciling", le.identity);
        leading = true;
        jobs.StartReconciling();
      };
      le.on_stopped_leading = [&] {
        if (shutdown.requested()) return;
        spdlog::error("lost the lease; exiting so a fresh process takes over");
        lost = true;
        shutdown.Request();
      };
      le.on_new_leader = [](const std::string& who) { spdlog::info("leader is now {}", who.empty() ? "nobody" : who); };
      elector = std::make_unique<controller::LeaderElector>(
          kube::ResourceClient(client, kube::resources::kLeases), le);
      election = std::thread([&] { elector->Run(); });
    } else {
      jobs.StartReconciling();
    }

    shutdown.Wait();
    spdlog::info("shutting down");
    const bool drained = jobs.Stop(std::chrono::seconds(10));
    if (elector) {
      elector->Stop();
      election.join();
    }
    endpoints.Stop();
    if (!drained) spdlog::warn("some reconciles did not finish within 10 s");
    return lost ? 1 : 0;
  } catch (const std::exception& e) {
    spdlog::critical("{}", e.what());
    return 1;
  }
}
