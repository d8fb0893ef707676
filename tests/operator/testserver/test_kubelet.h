// TestKubelet: a kubelet for the test API server that runs pods as local processes, so
// operator tests see pods really start, run, exit, get OOM-killed and terminate.
//   - Watches pods; binds unscheduled ones to itself (pods/binding, as a scheduler
//     would) and runs those bound to its node.
//   - Runs the first container's command + args (no image: the command must exist on
//     this machine), with its env: plain values, and valueFrom.fieldRef for
//     metadata.name/namespace/uid, metadata.labels['k'], spec.nodeName, status.podIP;
//     $(VAR) references in command/args are expanded as Kubernetes does. Also
//     HEADROOM_TERMINATION_LOG=<pod dir>/termination-log, and HOSTNAME = pod name.
//     stdout+stderr go to <pod dir>/container.log.
//   - As root with a writable memory cgroup hierarchy, each pod runs in its own memory
//     cgroup at the container's limits.memory, so the kernel OOM killer acts as in a
//     real node.
//   - Status: Pending (from the server) -> Running (podIP 127.0.0.1, containerStatuses
//     running) -> Succeeded (exit 0) / Failed, with containerStatuses[0].state.terminated
//     {exitCode, reason, message}: reason "OOMKilled" when SIGKILLed with the cgroup's
//     oom_kill counter up, "Completed" for 0, "Error" otherwise; message = the
//     termination log's first 4 KiB (a fresh log per pod). No container restarts (pods use
//     restartPolicy Never). Each status patch carries the pod's uid, a precondition as the
//     kubelet's status manager sends it: a late end of a deleted pod's process never lands
//     on a new pod of the same name.
//   - Deletion: a pod with a deletionTimestamp gets SIGTERM, SIGKILL after
//     deletionGracePeriodSeconds, and once the process is gone the kubelet deletes the
//     pod with grace 0 (finalising it), as a real kubelet does.
// API failures (injected faults) are retried; nothing here assumes a perfect server.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/kubeclient/kube_config.h"
#include "operator/kubeclient/resource_client.h"
#include "operator/kubeclient/watcher.h"

namespace headroom::memory {
class MemoryCgroup;
}

namespace headroom::testserver {

class TestKubelet {
 public:
  struct Options {
    std::string node_name = "test-node";
    std::string work_dir;            // per-pod directories; empty = a fresh temp dir
    std::string ns;                  // "" = pods of every namespace
    bool claim_unscheduled = true;   // bind pods without spec.nodeName to this node
    bool use_memory_cgroups = true;  // when running as root and the machine allows it
    std::string cgroup_parent = "headroom-test-kubelet";
  };

  TestKubelet(kubeclient::KubeConfig config, Options options);
  ~TestKubelet();
  TestKubelet(const TestKubelet&) = delete;
  TestKubelet& operator=(const TestKubelet&) = delete;

  void Start();
  // Kills every process it started (SIGKILL) and stops watching. Pod objects are left
  // as they are.
  void Stop();

  int running() const;  // processes alive now
  int started() const { return started_; }
  bool memory_cgroups() const { return cgroups_enabled_; }
  std::string PodDir(const std::string& ns, const std::string& name) const;

 private:
  struct PodProcess;
  void OnPod(const nlohmann::json& pod);
  void OnPodGone(const nlohmann::json& pod);
  void StartPod(const nlohmann::json& pod);
  void Wait(std::shared_ptr<PodProcess> p);
  void Terminate(const std::shared_ptr<PodProcess>& p, int64_t grace_seconds);
  void Finalize(const std::string& ns, const std::string& name, const std::string& uid);
  void PatchStatus(const PodProcess& p, const nlohmann::json& status);
  void Reaper();
  template <typename F>
  void Retry(const char* what, F&& f);

  kubeclient::KubeConfig config_;
  Options options_;
  std::unique_ptr<kubeclient::RestClient> client_;
  std::unique_ptr<kubeclient::ResourceClient> pods_;
  std::unique_ptr<kubeclient::Watcher> watcher_;
  bool cgroups_enabled_ = false;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<PodProcess>> by_uid_;
  std::vector<std::thread> waiters_;
  std::thread reaper_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> started_{0};
};

}  // namespace headroom::testserver
