#include "operator/trainingjob/pod_backend.h"

#include <spdlog/spdlog.h>

#include <future>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>

#include "core/metrics/names.h"
#include "core/metrics/prometheus_text.h"
#include "core/protocol/step_metrics.h"
#include "core/protocol/termination_message.h"
#include "operator/trainingjob/http_scrape.h"
#include "operator/kubeclient/resource_client.h"
#include "operator/manifests/children.h"
#include "operator/manifests/gang.h"

namespace headroom::trainingjob {

using nlohmann::json;

namespace {

bool Transient(const kubeclient::ApiError& e) { return e.code() == 0 || e.code() == 429 || e.code() >= 500; }

int64_t GenerationOf(const json& pod) {
  const std::string g = kubeclient::Label(pod, manifests::kLabelGeneration);
  try {
    return g.empty() ? 0 : std::stoll(g);
  } catch (const std::exception&) {
    return 0;
  }
}

int RankOf(const json& pod) {
  const std::string r = kubeclient::Label(pod, manifests::kLabelRank);
  try {
    return r.empty() ? -1 : std::stoi(r);
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

std::optional<runtime::RankExit> PodExit(const json& pod) {
  if (!pod.is_object() || !pod.contains("status")) return std::nullopt;
  const json& status = pod["status"];
  if (status.contains("containerStatuses") && status["containerStatuses"].is_array() &&
      !status["containerStatuses"].empty()) {
    const json& cs = status["containerStatuses"][0];
    if (cs.contains("state") && cs["state"].contains("terminated")) {
      const json& t = cs["state"]["terminated"];
      runtime::RankExit e;
      e.exit_code = t.value("exitCode", 1);
      e.reason = t.value("reason", "");
      e.oom_killed = e.reason == "OOMKilled";
      e.termination_message = t.value("message", "");
      if (e.reason.empty() || e.reason == "Error" || e.reason == "Completed") {
        e.reason = protocol::ExitReason(e.exit_code, e.oom_killed);
      }
      return e;
    }
  }
  // A pod that failed without ever running its container (no such command, evicted).
  const std::string phase = status.value("phase", "");
  if (phase == "Failed" || phase == "Succeeded") {
    runtime::RankExit e;
    e.exit_code = phase == "Succeeded" ? 0 : 1;
    e.reason = status.value("reason", phase);
    e.termination_message = status.value("message", "");
    return e;
  }
  return std::nullopt;
}

std::string PodDisruption(const json& pod) {
  if (!pod.is_object() || !pod.contains("status") || !pod["status"].is_object()) return "";
  const json& conditions = pod["status"].contains("conditions") ? pod["status"]["conditions"] : json::array();
  if (!conditions.is_array()) return "";
  for (const json& c : conditions) {
    if (!c.is_object() || c.value("type", "") != "DisruptionTarget" || c.value("status", "") != "True") continue;
    const std::string reason = c.value("reason", "");
    const std::string message = c.value("message", "");
    std::string what;
    // The reasons Kubernetes sets (the pod disruption conditions); the scheduler's was
    // PreemptionByKubeScheduler before 1.27.
    if (reason == "PreemptionByScheduler" || reason == "PreemptionByKubeScheduler") {
      what = "preempted by the scheduler for a higher-priority pod";
    } else if (reason == "EvictionByEvictionAPI") {
      what = "evicted by a node drain (the Eviction API)";
    } else if (reason == "DeletionByTaintManager") {
      what = "deleted by the taint manager (a NoExecute taint on its node)";
    } else if (reason == "DeletionByPodGC") {
      what = "deleted by the pod garbage collector (its node is gone)";
    } else if (reason == "TerminationByKubelet") {
      what = "terminated by the kubelet (node pressure or a node shutdown)";
    } else {
      what = "disrupted";
    }
    return what + " (DisruptionTarget " + (reason.empty() ? "with no reason" : reason) +
           (message.empty() ? "" : ": " + message) + ")";
  }
  // Kueue marks the pods it stops (its workload preempted or evicted) with a condition of
  // its own before deleting them.
  for (const json& c : conditions) {
    if (!c.is_object() || c.value("type", "") != "TerminationTarget" || c.value("status", "") != "True") continue;
    const std::string reason = c.value("reason", "");
    const std::string message = c.value("message", "");
    return "stopped by Kueue (TerminationTarget " + (reason.empty() ? "with no reason" : reason) +
           (message.empty() ? "" : ": " + message) + ")";
  }
  return "";
}

PodBackend::PodBackend(kubeclient::RestClient& client, spec::TrainingJob owner, std::string ns,
                       PodBackendOptions options)
    : client_(&client), ns_(std::move(ns)), options_(std::move(options)), owner_(std::move(owner)) {}

template <typename F>
auto PodBackend::WithRetry(const std::string& what, F&& call) -> decltype(call()) {
  std::chrono::milliseconds delay = options_.api_retry_delay;
  for (int attempt = 1;; ++attempt) {
    try {
      return call();
    } catch (const kubeclient::ApiError& e) {
      if (!Transient(e) || attempt >= options_.api_attempts) throw;
      spdlog::debug("{}: {} (attempt {}, retrying)", what, e.what(), attempt);
    }
    std::this_thread::sleep_for(delay);
    delay *= 2;
  }
}

int PodBackend::generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

void PodBackend::SetOwner(const spec::TrainingJob& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  owner_.metadata = owner.metadata;
}

void PodBackend::Adopt(int generation, int workers, int ranks_per_pod) {
  std::lock_guard<std::mutex> lock(mu_);
  generation_ = generation;
  workers_ = workers;
  ranks_per_pod_ = std::max(1, ranks_per_pod);
  // Pods seen before adoption were filed as "other"; move this generation's into ranks_.
  ranks_.clear();
  pods_to_create_.clear();
  assumed_exit_.reset();
  for (int r = 0; r < workers; r += ranks_per_pod_) ranks_[r].adopted = true;
}

void PodBackend::AdoptEnded(int generation, int workers, const runtime::RankExit& ended, int ranks_per_pod) {
  Adopt(generation, workers, ranks_per_pod);
  std::lock_guard<std::mutex> lock(mu_);
  assumed_exit_ = ended;
}

void PodBackend::OnPodEvent(const json& pod, bool deleted) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t gen = GenerationOf(pod);
  const int rank = RankOf(pod);
  const std::string name = kubeclient::Name(pod);
  if (gen == generation_ && generation_ > 0 && rank >= 0 && rank < workers_ && rank % ranks_per_pod_ == 0) {
    RankPod& rp = ranks_[rank];
    // An adopted pod already being deleted when first seen may be the earlier operator's
    // own drain or kill: only its DisruptionTarget condition says it was taken away.
    const bool adopted_first_sight = rp.adopted && !rp.seen;
    rp.seen = true;
    rp.name = name;
    const bool ended_before = rp.exit.has_value();
    // Keep the last state that says how the container ended: a deletion event may carry
    // an older copy when the watch was down (a relist synthesises it from the cache).
    if (std::optional<runtime::RankExit> e = PodExit(pod)) rp.exit = std::move(e);
    // Taken away from outside: the cluster says so (DisruptionTarget), or someone else
    // deleted it while it ran (it then drains: 75, or is killed: 128+signal).
    const bool deleting = deleted || pod["metadata"].contains("deletionTimestamp");
    if (rp.disruption.empty()) {
      if (std::string why = PodDisruption(pod); !why.empty()) {
        rp.disruption = "pod " + name + " was " + why;
        rp.disruption_from_condition = true;
      } else if (deleting && !adopted_first_sight && !ended_before &&
                 (!rp.exit || rp.exit->exit_code == protocol::kExitDrained || rp.exit->exit_code >= 128)) {
        NoteForeignDeletion(rp);
      }
    } else if (rp.disruption_from_condition && !deleting && !rp.exit && PodDisruption(pod).empty()) {
      // The condition went (the pod GC resets one whose deletion never came): it still runs.
      rp.disruption.clear();
      rp.disruption_from_condition = false;
    }
    const json empty = json::object();
    const json& status = pod.contains("status") ? pod["status"] : empty;
    rp.ip = status.value("podIP", "");
    rp.scrapable = status.value("phase", "") == "Running" && !rp.ip.empty();
    rp.metrics_port = manifests::kMetricsPort;
    try {
      const json& ann = pod["metadata"].contains("annotations") ? pod["metadata"]["annotations"] : empty;
      if (ann.contains(manifests::kMetricsPortAnnotation)) {
        rp.metrics_port = std::stoi(ann[manifests::kMetricsPortAnnotation].get<std::string>());
      }
    } catch (const std::exception&) {
    }
    rp.deleted = deleted;
    if (!deleted) rp.pending_create = false;
    other_pods_.erase(name);
    return;
  }
  if (deleted) {
    other_pods_.erase(name);
  } else {
    other_pods_[name] = gen;
  }
}

void PodBackend::NoteForeignDeletion(RankPod& rp) {
  if (rp.deleted_by_us || !rp.disruption.empty()) return;
  rp.disruption = "pod " + rp.name +
                  " was deleted by someone other than the operator (no DisruptionTarget condition: kubectl delete "
                  "pod, or another controller)";
}

void PodBackend::Sync(const std::vector<json>& cached_pods) {
  std::set<std::string> cached;
  for (const json& pod : cached_pods) {
    cached.insert(kubeclient::Name(pod));
    OnPodEvent(pod, false);
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [rank, rp] : ranks_) {
    if (rp.seen && !rp.deleted && !cached.count(rp.name)) {
      rp.deleted = true;
      if (!rp.exit && !rp.adopted) NoteForeignDeletion(rp);  // its deletion event was missed
    }
  }
  for (auto it = other_pods_.begin(); it != other_pods_.end();) {
    it = cached.count(it->first) ? std::next(it) : other_pods_.erase(it);
  }
}

void PodBackend::EnsureSpecConfigMap(const runtime::LaunchRequest& request) {
  kubeclient::ResourceClient configmaps(*client_, kubeclient::resources::kConfigMaps);
  manifests::WorkerGeneration gen{request.job, request.generation, request.guard_history_json};
  const json wanted = manifests::BuildSpecConfigMap(gen, ns_);
  const std::string name = kubeclient::Name(wanted);
  WithRetry("configmap " + name, [&] {
    try {
      configmaps.Create(ns_, wanted);
      return 0;
    } catch (const kubeclient::ApiError& e) {
      if (!e.IsAlreadyExists()) throw;
    }
    configmaps.UpdateWithRetry(ns_, name, [&](json& cm) {
      if (cm["data"] == wanted["data"] && cm["metadata"]["labels"] == wanted["metadata"]["labels"]) return false;
      cm["data"] = wanted["data"];
      cm["metadata"]["labels"] = wanted["metadata"]["labels"];
      if (wanted["metadata"].contains("ownerReferences")) {
        cm["metadata"]["ownerReferences"] = wanted["metadata"]["ownerReferences"];
      }
      return true;
    });
    return 0;
  });
}

void PodBackend::EnsureService(const spec::TrainingJob& job) {
  kubeclient::ResourceClient services(*client_, kubeclient::resources::kServices);
  const json wanted = manifests::BuildHeadlessService(job, ns_);
  WithRetry("service " + kubeclient::Name(wanted), [&] {
    try {
      services.Create(ns_, wanted);
    } catch (const kubeclient::ApiError& e) {
      if (!e.IsAlreadyExists()) throw;
    }
    return 0;
  });
}

namespace {

kubeclient::ResourceType PodGroupType(const manifests::PodGroupKind& kind) {
  return kubeclient::ResourceType{kind.group, kind.version, kind.plural, kind.kind, true};
}

}  // namespace

void PodBackend::EnsurePodGroup(const runtime::LaunchRequest& request) {
  const manifests::WorkerGeneration gen{request.job, request.generation, request.guard_history_json};
  const json wanted = manifests::BuildPodGroup(gen, ns_);
  if (wanted.is_null()) return;
  const manifests::PodGroupKind& kind = *manifests::PodGroupKindOf(manifests::GangSchedulerOf(request.job));
  kubeclient::ResourceClient groups(*client_, PodGroupType(kind));
  const std::string name = kubeclient::Name(wanted);
  try {
    WithRetry("podgroup " + name, [&] {
      try {
        groups.Create(ns_, wanted);
      } catch (const kubeclient::ApiError& e) {
        if (!e.IsAlreadyExists()) throw;
      }
      return 0;
    });
  } catch (const kubeclient::ApiError& e) {
    if (e.code() != 404) throw;
    throw std::runtime_error("schedulerName " + request.job.spec.pod_template.scheduler_name +
                             " takes a PodGroup, but the cluster serves no " + kind.ApiVersion() + " " + kind.plural +
                             " (is that scheduler installed?)");
  }
}

void PodBackend::DeleteOtherPodGroups(const spec::TrainingJob& job, int generation) {
  const manifests::PodGroupKind* kind = manifests::PodGroupKindOf(manifests::GangSchedulerOf(job));
  if (kind == nullptr) return;
  kubeclient::ResourceClient groups(*client_, PodGroupType(*kind));
  kubeclient::ListOptions mine;
  mine.label_selector = std::string(manifests::kLabelJobName) + "=" + job.metadata.name + "," +
                        manifests::kLabelManagedBy + "=" + manifests::kManagedByValue;
  try {
    const json list = WithRetry("list podgroups", [&] { return groups.List(ns_, mine); });
    for (const json& g : list.value("items", json::array())) {
      if (GenerationOf(g) == generation) continue;
      kubeclient::DeleteOptions options;
      options.precondition_uid = kubeclient::Uid(g);
      WithRetry("delete podgroup " + kubeclient::Name(g),
                [&] { return groups.Delete(ns_, kubeclient::Name(g), options); });
    }
  } catch (const kubeclient::ApiError& e) {
    // Left for the garbage collector (they are owned by the job): never a reason to stop.
    spdlog::warn("{}: earlier generations' PodGroups not deleted: {}", job.metadata.name, e.what());
  }
}

bool PodBackend::CreatePod(int rank) {
  json manifest;
  int generation;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pods_to_create_.find(rank);
    if (it == pods_to_create_.end()) return true;  // created already (or cancelled by a drain)
    manifest = it->second;
    generation = generation_;
  }
  kubeclient::ResourceClient pods(*client_, kubeclient::resources::kPods);
  const std::string name = kubeclient::Name(manifest);
  return WithRetry("pod " + name, [&] {
    try {
      pods.Create(ns_, manifest);
      std::lock_guard<std::mutex> lock(mu_);
      ++pods_created_;
      return true;
    } catch (const kubeclient::ApiError& e) {
      if (!e.IsAlreadyExists()) throw;
    }
    std::optional<json> existing = pods.TryGet(ns_, name);
    if (!existing) return false;                             // gone meanwhile: the next Observe creates it
    if (GenerationOf(*existing) == generation) return true;  // ours, created by an earlier try
    // An older generation's pod still holds the name: it has ended (Launch is only called
    // when no rank is alive), so it goes now, and the next Observe creates ours.
    kubeclient::DeleteOptions now;
    now.grace_period_seconds = 0;
    now.precondition_uid = kubeclient::Uid(*existing);
    try {
      pods.Delete(ns_, name, now);
    } catch (const kubeclient::ApiError& e) {
      if (e.code() != 409 && e.code() != 404) throw;
    }
    return false;
  });
}

void PodBackend::Launch(const runtime::LaunchRequest& request) {
  const spec::TrainingJob& job = request.job;
  {
    // The gang before any of its pods (a scheduler that saw a pod first would place it
    // alone), and before they are planned: a group the cluster refuses leaves none to create.
    runtime::LaunchRequest grouped = request;
    {
      std::lock_guard<std::mutex> lock(mu_);
      grouped.job.metadata = owner_.metadata;
    }
    EnsurePodGroup(grouped);
  }
  std::map<std::string, int64_t> stale;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The previous generation's pods become "other" pods: they have ended and hold names
    // (rank 1 after a reshard from 2 to 1 would otherwise stay forever).
    for (const auto& [rank, rp] : ranks_) {
      if (rp.seen && !rp.deleted) other_pods_[rp.name] = generation_;
    }
    generation_ = request.generation;
    workers_ = job.spec.workers;
    ranks_per_pod_ = std::max(1, job.spec.ranks_per_pod);
    ranks_.clear();
    pods_to_create_.clear();
    checkpoint_step_.reset();
    assumed_exit_.reset();
    // The job as launched, with the owner's identity (the reconciler's copy may predate
    // the object's uid, e.g. after a delete and re-create).
    spec::TrainingJob owned = job;
    owned.metadata = owner_.metadata;
    manifests::WorkerGeneration gen{owned, request.generation, request.guard_history_json};
    for (int r : manifests::PodFirstRanks(job.spec)) {
      json pod = manifests::BuildWorkerPod(gen, r, ns_);
      if (options_.customize_pod) options_.customize_pod(pod, request, r);
      pods_to_create_[r] = std::move(pod);
      ranks_[r].pending_create = true;
    }
    for (const auto& [name, g] : other_pods_) {
      if (g != request.generation) stale[name] = g;
    }
  }
  spec::TrainingJob owned = job;
  {
    std::lock_guard<std::mutex> lock(mu_);
    owned.metadata = owner_.metadata;
  }
  runtime::LaunchRequest owned_request = request;
  owned_request.job = owned;
  EnsureSpecConfigMap(owned_request);
  EnsureService(owned);
  // Pods of earlier generations have ended; free their names (ranks beyond the new size
  // too, after a reshard down).
  kubeclient::ResourceClient pods(*client_, kubeclient::resources::kPods);
  for (const auto& [name, g] : stale) {
    kubeclient::DeleteOptions now;
    now.grace_period_seconds = 0;
    WithRetry("delete pod " + name, [&] { return pods.Delete(ns_, name, now); });
  }
  // Earlier generations' groups go with their pods.
  DeleteOtherPodGroups(owned, request.generation);
  for (int r : manifests::PodFirstRanks(job.spec)) {
    if (CreatePod(r)) {
      std::lock_guard<std::mutex> lock(mu_);
      ranks_[r].pending_create = false;
      pods_to_create_.erase(r);  // created: the manifest is no longer needed
    }
  }
}

runtime::Observation PodBackend::Observe() {
  runtime::Observation o;
  o.now = std::chrono::steady_clock::now();
  CreatePendingPods();
  const std::vector<ScrapeTarget> scrape = ObserveRanks(o);
  ScrapeSteps(scrape, o);
  return o;
}

void PodBackend::CreatePendingPods() {
  std::vector<int> to_create;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [rank, rp] : ranks_) {
      if (rp.pending_create && !rp.seen) to_create.push_back(rank);
    }
  }
  for (int rank : to_create) {
    try {
      if (CreatePod(rank)) {
        std::lock_guard<std::mutex> lock(mu_);
        ranks_[rank].pending_create = false;
        pods_to_create_.erase(rank);
      }
    } catch (const std::exception& e) {
      spdlog::warn("creating rank {} of generation {}: {}", rank, generation(), e.what());
    }
  }
}

std::vector<PodBackend::ScrapeTarget> PodBackend::ObserveRanks(runtime::Observation& o) {
  std::vector<ScrapeTarget> scrape;
  std::lock_guard<std::mutex> lock(mu_);
  o.generation = generation_;
  for (auto& [rank, rp] : ranks_) {
    const int first_rank = rank;
    runtime::RankObservation ro;
    if (!rp.seen && !rp.pending_create && assumed_exit_) {
      ro.exit = *assumed_exit_;
    } else if (!rp.seen) {
      ro.running = true;  // being created, or created and not yet seen: starting
    } else if (rp.exit) {
      ro.exit = *rp.exit;
      ro.exit->disruption = rp.disruption;
      if (std::optional<int64_t> c = protocol::CheckpointedStep(rp.exit->exit_code, rp.exit->termination_message)) {
        checkpoint_step_ = std::max(checkpoint_step_.value_or(0), *c);
      }
    } else if (rp.deleted) {
      ro.exit = runtime::RankExit{protocol::kExitKilled, false, "PodDeleted",
                                  "the pod was deleted before its container reported how it ended"};
      ro.exit->disruption = rp.disruption;
    } else {
      ro.running = true;
      if (rp.scrapable) scrape.push_back({rank, rp.ip, rp.metrics_port});
    }
    // A pod's ranks end together: its launcher stops them and exits with the deciding
    // rank's code and message (core/launch/pod_launcher.h), reported for its first rank.
    for (int i = 0; i < ranks_per_pod_; ++i) {
      o.ranks.push_back(ro);
      o.ranks.back().rank = first_rank + i;
      if (i > 0 && ro.exit) o.ranks.back().exit = runtime::PodPeerExit(*ro.exit);
    }
  }
  o.checkpoint_step = checkpoint_step_;
  return scrape;
}

void PodBackend::ScrapeSteps(const std::vector<ScrapeTarget>& scrape, runtime::Observation& o) {
  // Outside the lock, all ranks at once: a reconcile waits at most one scrape_timeout,
  // however many ranks the job has or how many of them hang.
  std::vector<std::future<std::optional<std::string>>> pages;
  for (const ScrapeTarget& t : scrape) {
    pages.push_back(std::async(std::launch::async, [t, timeout = options_.scrape_timeout] {
      std::string why;
      std::optional<std::string> body = HttpGet(t.ip, t.port, "/metrics", timeout, &why);
      if (!body) spdlog::debug("scrape rank {}: {}", t.rank, why);
      return body;
    }));
  }
  for (size_t i = 0; i < scrape.size(); ++i) {
    const ScrapeTarget& t = scrape[i];
    std::optional<std::string> body = pages[i].get();
    if (!body) continue;
    std::vector<metrics::MetricSample> parsed = metrics::ParsePrometheusText(*body);
    std::lock_guard<std::mutex> lock(mu_);
    // A pod of several ranks serves each rank's series, labelled {rank}; one of one rank
    // is that rank whatever its label says.
    std::map<int, std::vector<metrics::MetricSample>> by_rank;
    for (metrics::MetricSample& sample : parsed) {
      int rank = t.rank;
      if (ranks_per_pod_ > 1) {
        auto label = sample.labels.find(metrics::kLabelRank);
        if (label == sample.labels.end()) continue;
        try {
          rank = std::stoi(label->second);
        } catch (const std::exception&) {
          continue;
        }
        if (rank < t.rank || rank >= t.rank + ranks_per_pod_) continue;  // not this pod's
      }
      by_rank[rank].push_back(std::move(sample));
    }
    for (const auto& [rank, samples] : by_rank) {
      std::optional<protocol::StepRecord> r = protocol::StepRecordFromMetrics(samples);
      std::optional<protocol::ModelFetchRecord> fetch = protocol::ModelFetchFromMetrics(samples);
      if (fetch && o.generation == generation_) {
        fetch->rank = rank;
        fetch->generation = generation_;
        o.model_fetch = *fetch;
      }
      if (!r) continue;
      auto it = ranks_.find(t.rank);
      if (it == ranks_.end() || o.generation != generation_) continue;
      int64_t& last = it->second.last_steps[rank];
      if (r->step <= last) continue;
      last = r->step;
      r->rank = rank;
      r->generation = generation_;
      o.new_steps.push_back(*r);
    }
  }
}

void PodBackend::DeletePods(std::optional<int64_t> grace_seconds) {
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [rank, rp] : ranks_) {
      rp.deleted_by_us = true;  // before the request: its deletion event may come first
      if (!rp.deleted) names.push_back(manifests::WorkerPodName(owner_.metadata.name, rank));
      // A rank not created yet must not be created any more.
      if (!rp.seen) pods_to_create_.erase(rank);
    }
    for (auto& [rank, rp] : ranks_) {
      if (!rp.seen && rp.pending_create) {
        rp.pending_create = false;
        rp.deleted = true;
      }
    }
  }
  kubeclient::ResourceClient pods(*client_, kubeclient::resources::kPods);
  kubeclient::DeleteOptions options;
  options.grace_period_seconds = grace_seconds;
  for (const std::string& name : names) {
    try {
      WithRetry("delete pod " + name, [&] { return pods.Delete(ns_, name, options); });
    } catch (const std::exception& e) {
      spdlog::warn("deleting pod {}: {}", name, e.what());
    }
  }
}

void PodBackend::Drain(std::chrono::milliseconds grace) {
  DeletePods(std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::seconds>(grace).count()));
}

void PodBackend::Kill() { DeletePods(0); }

}  // namespace headroom::trainingjob
