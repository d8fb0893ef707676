// headroom-operator: reconciles TrainingJobs into guarded worker pods (docs/design.md).
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

#include "operator/controllerkit/leader_election.h"
#include "operator/controllerkit/operator_endpoints.h"
#include "operator/controllerkit/operator_metrics.h"
#include "operator/controllerkit/shutdown_signal.h"
#include "operator/trainingjob/controller.h"
#include "operator/kubeclient/kube_config.h"
#include "operator/kubeclient/resource_client.h"
#include "operator/kubeclient/rest_client.h"

namespace {

using namespace headroom;

std::string Identity() {
  if (const char* pod = std::getenv("POD_NAME")) return pod;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + "-" + std::to_string(::getpid());
}

struct OperatorFlags {
  std::string kubeconfig;
  std::string ns;
  int metrics_port = 8080;
  bool leader_elect = false;
  std::string lease_name = "headroom-operator";
  int reconcile_workers = 4;
  double resync_seconds = 30;
};

void AddFlags(CLI::App& app, OperatorFlags& f) {
  app.add_option("--kubeconfig", f.kubeconfig,
                 "kubeconfig file (default: in-cluster config, else $KUBECONFIG or ~/.kube/config)");
  app.add_option("--namespace", f.ns, "watch only this namespace (default: every namespace)");
  app.add_option("--metrics-port", f.metrics_port, "port of /metrics, /healthz and /readyz (0 = any free port)")
      ->check(CLI::Range(0, 65535));
  app.add_flag("--leader-elect", f.leader_elect, "elect one active replica on a coordination.k8s.io Lease");
  app.add_option("--lease-name", f.lease_name, "the Lease's name (with --leader-elect)");
  app.add_option("--workers", f.reconcile_workers, "reconcile threads")->check(CLI::Range(1, 64));
  app.add_option("--resync-seconds", f.resync_seconds, "re-check every job this often even when nothing changed")
      ->check(CLI::Range(0.1, 86400.0));
  app.set_version_flag("--version", "headroom-operator 0.1.0");
}

kubeclient::KubeConfig LoadConfig(const std::string& kubeconfig) {
  if (!kubeconfig.empty()) return kubeclient::LoadKubeconfig(kubeconfig);
  if (kubeclient::InCluster()) return kubeclient::LoadInClusterConfig();
  return kubeclient::LoadKubeconfig("");
}

// /healthz: alive unless shutting down; /readyz: the informers have listed once, and
// which replica leads.
void AddChecks(controllerkit::OperatorEndpoints& endpoints, controllerkit::ShutdownSignal& shutdown,
               trainingjob::TrainingJobController& jobs, bool leader_elect, const std::atomic<bool>& leading) {
  endpoints.AddHealthCheck("shutdown", [&](std::string* detail) {
    *detail = shutdown.requested() ? "shutting down" : "ok";
    return true;
  });
  endpoints.AddReadinessCheck("informers", [&](std::string* detail) {
    const bool synced = jobs.HasSynced();
    *detail = synced ? "synced" : "waiting for the first list";
    return synced;
  });
  endpoints.AddReadinessInfo("leader-election", [&, leader_elect] {
    return !leader_elect ? std::string("disabled") : leading ? std::string("leading") : std::string("following");
  });
}

// Reconciling starts when this replica takes the lease; losing it requests shutdown
// (and `lost`), so the process exits 1 and restarts with fresh state.
std::unique_ptr<controllerkit::LeaderElector> ElectLeader(kubeclient::RestClient& client, const std::string& ns,
                                                          const std::string& lease_name,
                                                          trainingjob::TrainingJobController& jobs,
                                                          controllerkit::ShutdownSignal& shutdown,
                                                          std::atomic<bool>& leading, std::atomic<bool>& lost) {
  controllerkit::LeaderElectionConfig le;
  le.ns = ns;
  le.lease_name = lease_name;
  le.identity = Identity();
  le.on_started_leading = [&jobs, &leading, identity = le.identity] {
    spdlog::info("leading as {}: reconciling", identity);
    leading = true;
    jobs.StartReconciling();
  };
  le.on_stopped_leading = [&shutdown, &lost] {
    if (shutdown.requested()) return;
    spdlog::error("lost the lease; exiting so a fresh process takes over");
    lost = true;
    shutdown.Request();
  };
  le.on_new_leader = [](const std::string& who) { spdlog::info("leader is now {}", who.empty() ? "nobody" : who); };
  return std::make_unique<controllerkit::LeaderElector>(
      kubeclient::ResourceClient(client, kubeclient::resources::kLeases), le);
}

int RunOperator(const OperatorFlags& flags, controllerkit::ShutdownSignal& shutdown) {
  const kubeclient::KubeConfig config = LoadConfig(flags.kubeconfig);
  spdlog::info("API server {} ({})", config.server, config.source);
  kubeclient::RestClient client(config);
  auto metrics = std::make_shared<controllerkit::OperatorMetrics>();

  trainingjob::TrainingJobControllerOptions options;
  options.ns = flags.ns;
  options.workers = flags.reconcile_workers;
  options.resync_period = std::chrono::milliseconds(static_cast<int64_t>(flags.resync_seconds * 1000));
  trainingjob::TrainingJobController jobs(client, options, metrics);

  std::atomic<bool> leading{!flags.leader_elect};
  controllerkit::OperatorEndpoints endpoints("0.0.0.0", flags.metrics_port, metrics);
  AddChecks(endpoints, shutdown, jobs, flags.leader_elect, leading);
  endpoints.Start();
  spdlog::info("/metrics /healthz /readyz on port {}", endpoints.port());

  jobs.StartInformers();
  std::unique_ptr<controllerkit::LeaderElector> elector;
  std::thread election;
  std::atomic<bool> lost{false};
  if (flags.leader_elect) {
    elector =
        ElectLeader(client, flags.ns.empty() ? config.ns : flags.ns, flags.lease_name, jobs, shutdown, leading, lost);
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
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"headroom-operator: reconciles TrainingJobs (headroom.dev/v1alpha1) into guarded worker pods"};
  OperatorFlags flags;
  AddFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  controllerkit::ShutdownSignal& shutdown = controllerkit::ShutdownSignal::Install();
  try {
    return RunOperator(flags, shutdown);
  } catch (const std::exception& e) {
    spdlog::critical("{}", e.what());
    return 1;
  }
}
