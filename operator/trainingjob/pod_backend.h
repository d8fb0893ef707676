// PodBackend: the runtime's WorkerBackend (operator/runtime/worker_backend.h) over
// Kubernetes pods — what the operator uses where `headroom run` uses local processes.
//
//   Launch  = the spec ConfigMap `<job>-spec` created or updated to this generation's
//             spec, the headless Service ensured, the generation's PodGroup created when
//             its scheduler gangs pods (and earlier generations' deleted), then one pod per rank built by
//             operator/manifests (labels headroom.dev/job-name|rank|generation). Pods
//             of earlier generations still present (finished, holding the names) are
//             deleted first; a rank whose name is still taken is created by a later
//             Observe(). Idempotent: a pod that exists with this generation's label is
//             never recreated, so there are never two pods for one rank.
//   Observe = the job's pods as the operator's informer last saw them (OnPodEvent feeds
//             them; no API read), each rank's end from containerStatuses[0].state.
//             terminated {exitCode, reason "OOMKilled", message = termination message};
//             step records (and, before a worker's first step, its model download) by
//             scraping each running pod's /metrics at its pod IP and the
//             port in its prometheus.io/port annotation (each step reported once, per
//             rank; all ranks scraped at once, so one Observe waits at most one
//             scrape_timeout); a rank whose pod vanished without a recorded end reads as killed
//             (137, "PodDeleted"). A pod the cluster took away carries the cause in its
//             end's RankExit::disruption: its DisruptionTarget condition (preemption, the
//             eviction API, the taint manager, the kubelet), else a deletion this backend
//             did not ask for, seen before the container ended on its own.
//   Drain   = delete the generation's pods with gracePeriodSeconds = grace (the kubelet
//             sends SIGTERM, the workers checkpoint and exit 75).
//   Kill    = delete them with grace 0.
// API calls that fail transiently (5xx, 429, transport) are retried a few times with
// backoff; creates are safe to retry because a repeat answers AlreadyExists.
// Thread-safety: OnPodEvent may run on the informer's thread while the reconcile thread
// calls the rest; everything is guarded by one mutex, never held across an API call.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/spec/training_job.h"
#include "operator/kubeclient/rest_client.h"
#include "operator/runtime/worker_backend.h"

namespace headroom::trainingjob {

struct PodBackendOptions {
  std::chrono::milliseconds scrape_timeout{500};  // per pod, per Observe
  int api_attempts = 6;                           // per API call, transient errors only
  std::chrono::milliseconds api_retry_delay{20};  // doubles per attempt
  // Adjusts each worker pod before it is created, after the job's spec.template is merged
  // in (what a user sets per job lives there): tests point the command at a local binary
  // (their kubelet has no images and mounts no ConfigMaps) and give each pod its own
  // metrics port (their pods share one IP).
  std::function<void(nlohmann::json& pod, const runtime::LaunchRequest& launch, int rank)> customize_pod;
};

class PodBackend : public runtime::WorkerBackend {
 public:
  // `owner` is the TrainingJob as read from the API server (its uid makes the
  // ownerReferences); `ns` its namespace.
  PodBackend(kubeclient::RestClient& client, spec::TrainingJob owner, std::string ns, PodBackendOptions options);

  // A pod of this job changed (deleted = it is gone). Any generation; others are ignored.
  void OnPodEvent(const nlohmann::json& pod, bool deleted);
  // The job's pods as the informer's cache holds them now: fed like events, and a rank
  // whose pod was seen but is no longer cached is taken as deleted (its deletion event
  // may have been missed, e.g. before this backend existed or while a watch was down).
  void Sync(const std::vector<nlohmann::json>& cached_pods);
  // After an operator restart: take up generation `generation`, run with `workers` ranks,
  // without launching anything (its pods arrive through OnPodEvent).
  void Adopt(int generation, int workers, int ranks_per_pod = 1);
  // The same for a generation whose pods are known to have ended and may be gone (a
  // suspended job being resumed): ranks with no pod read as having ended with `ended`.
  void AdoptEnded(int generation, int workers, const runtime::RankExit& ended, int ranks_per_pod = 1);
  // The owner's metadata changed (e.g. a new uid after delete + create with the same name).
  void SetOwner(const spec::TrainingJob& owner);

  void Launch(const runtime::LaunchRequest& request) override;
  runtime::Observation Observe() override;
  void Drain(std::chrono::milliseconds grace) override;
  void Kill() override;

  int generation() const;
  // Pod creations this backend sent that the server accepted (tests, benches).
  int64_t pods_created() const { return pods_created_; }

 private:
  // What Observe needs of a rank's pod, kept instead of the pod itself (the informer
  // already holds the object; 500 jobs must fit in the operator's memory target).
  struct RankPod {
    bool seen = false;  // the pod has been seen in the cache
    std::string name;
    std::optional<runtime::RankExit> exit;  // how its container ended, once it has
    bool scrapable = false;                 // phase Running with a pod IP
    std::string ip;
    int metrics_port = 0;
    bool deleted = false;                    // seen gone
    bool pending_create = false;             // not created yet (the name was still taken)
    bool deleted_by_us = false;              // this backend asked for its deletion (Drain, Kill)
    bool adopted = false;                    // of a generation an earlier operator launched (Adopt)
    std::string disruption;                  // why it was taken away from outside (RankExit::disruption)
    bool disruption_from_condition = false;  // read from DisruptionTarget (not a deletion)
    std::map<int, int64_t> last_steps;       // per rank in it: newest step its /metrics reported
  };

  struct ScrapeTarget {
    int rank;
    std::string ip;
    int port;
  };
  // Observe's parts: create the pods whose names were still taken; report every rank
  // (returning the running ones to scrape); read new step records from their /metrics.
  void CreatePendingPods();
  std::vector<ScrapeTarget> ObserveRanks(runtime::Observation& o);
  void ScrapeSteps(const std::vector<ScrapeTarget>& scrape, runtime::Observation& o);

  template <typename F>
  auto WithRetry(const std::string& what, F&& call) -> decltype(call());
  void EnsureSpecConfigMap(const runtime::LaunchRequest& request);
  void EnsureService(const spec::TrainingJob& job);
  // The generation's PodGroup (operator/manifests/gang.h), for a job whose scheduler
  // takes one; throws when the cluster does not serve its kind. Earlier generations'
  // groups are deleted as their pods are.
  void EnsurePodGroup(const runtime::LaunchRequest& request);
  void DeleteOtherPodGroups(const spec::TrainingJob& job, int generation);
  // Creates rank's pod; returns false when an older generation's pod still holds the name.
  bool CreatePod(int rank);
  void DeletePods(std::optional<int64_t> grace_seconds);
  // rp's pod is going or gone and this backend did not ask: the cause, unless one is known.
  void NoteForeignDeletion(RankPod& rp);

  kubeclient::RestClient* client_;
  std::string ns_;
  PodBackendOptions options_;

  mutable std::mutex mu_;
  spec::TrainingJob owner_;
  int generation_ = 0;
  int workers_ = 0;
  int ranks_per_pod_ = 1;                         // ranks_ is keyed by each pod's first rank: 0, K, 2K, ...
  std::map<int, nlohmann::json> pods_to_create_;  // this generation's manifests, by rank
  std::map<int, RankPod> ranks_;
  std::map<std::string, int64_t> other_pods_;  // name -> generation, pods of other generations
  std::optional<int64_t> checkpoint_step_;
  std::optional<runtime::RankExit> assumed_exit_;  // AdoptEnded
  int64_t pods_created_ = 0;
};

// How a pod's container ended, from its status (nullopt while it has not ended).
std::optional<runtime::RankExit> PodExit(const nlohmann::json& pod);

// Why the cluster is taking the pod away, in words, from its DisruptionTarget condition
// (status True: preemption, eviction, taint manager, kubelet, pod GC); "" when it has none.
std::string PodDisruption(const nlohmann::json& pod);

}  // namespace headroom::trainingjob
