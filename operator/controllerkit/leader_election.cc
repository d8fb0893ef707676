#include "operator/controllerkit/leader_election.h"

#include <spdlog/spdlog.h>

namespace headroom::controllerkit {

using nlohmann::json;

namespace {
// A string field of the lease spec; absent and null both read as "" (a released lease
// may carry either, depending on who wrote it).
std::string SpecString(const json& spec, const char* key) {
  auto it = spec.find(key);
  return it != spec.end() && it->is_string() ? it->get<std::string>() : "";
}
}  // namespace

LeaderElector::LeaderElector(kubeclient::ResourceClient leases, LeaderElectionConfig config,
                             std::shared_ptr<Clock> clock)
    : leases_(std::move(leases)),
      config_(std::move(config)),
      clock_(clock ? std::move(clock) : std::make_shared<RealClock>()) {
  if (config_.lease_name.empty() || config_.identity.empty() || config_.ns.empty()) {
    throw std::invalid_argument("leader election: namespace, lease name and identity must be set");
  }
  if (!(config_.lease_duration > config_.renew_deadline && config_.renew_deadline > config_.retry_period &&
        config_.retry_period.count() > 0)) {
    throw std::invalid_argument("leader election: need leaseDuration > renewDeadline > retryPeriod > 0");
  }
}

std::string LeaderElector::Leader() const {
  std::lock_guard<std::mutex> lock(mu_);
  return observed_holder_;
}

void LeaderElector::Stop() { stop_.Stop(); }

void LeaderElector::Observe(const json& lease) {
  const json spec = lease.value("spec", json::object());
  const std::string holder = SpecString(spec, "holderIdentity");
  const std::string record = holder + "|" + SpecString(spec, "renewTime") + "|" + kubeclient::ResourceVersionOf(lease);
  std::string previous;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (record != observed_record_) {
      observed_record_ = record;
      observed_time_ = clock_->Now();
    }
    previous = observed_holder_;
    observed_holder_ = holder;
    last_lease_ = lease;
  }
  if (holder != previous && config_.on_new_leader) config_.on_new_leader(holder);
}

bool LeaderElector::TryAcquireOrRenew() {
  const auto wall_now = std::chrono::system_clock::now();
  const std::string now = kubeclient::FormatMicroTime(wall_now);
  const int lease_seconds = static_cast<int>((config_.lease_duration.count() + 999) / 1000);
  std::optional<json> current = leases_.TryGet(config_.ns, config_.lease_name);
  if (!current) {
    json lease = {{"metadata", {{"name", config_.lease_name}, {"namespace", config_.ns}}},
                  {"spec",
                   {{"holderIdentity", config_.identity},
                    {"leaseDurationSeconds", lease_seconds},
                    {"acquireTime", now},
                    {"renewTime", now},
                    {"leaseTransitions", 0}}}};
    try {
      Observe(leases_.Create(config_.ns, lease));
      return true;
    } catch (const kubeclient::ApiError& e) {
      if (e.IsAlreadyExists()) return false;  // someone else created it first
      throw;
    }
  }
  Observe(*current);
  json spec = current->value("spec", json::object());
  const std::string holder = SpecString(spec, "holderIdentity");
  if (!holder.empty() && holder != config_.identity) {
    Clock::TimePoint seen;
    {
      std::lock_guard<std::mutex> lock(mu_);
      seen = observed_time_;
    }
    // Held by someone else, renewed (as far as we can tell) within the lease: wait.
    const auto held_for = std::chrono::milliseconds(spec.value("leaseDurationSeconds", lease_seconds) * 1000);
    if (clock_->Now() < seen + held_for) return false;
  }
  json updated = *current;
  json& s = updated["spec"];
  if (holder != config_.identity) {
    s["acquireTime"] = now;
    s["leaseTransitions"] = spec.value("leaseTransitions", 0) + 1;  // the holder changes
  }
  s["holderIdentity"] = config_.identity;
  s["leaseDurationSeconds"] = lease_seconds;
  s["renewTime"] = now;
  try {
    Observe(leases_.Update(config_.ns, updated));  // carries the resourceVersion we read
    return true;
  } catch (const kubeclient::ApiError& e) {
    if (e.IsConflict()) return false;  // someone wrote it since we read: try again later
    throw;
  }
}

void LeaderElector::Release() {
  try {
    leases_.UpdateWithRetry(config_.ns, config_.lease_name, [&](json& lease) {
      if (SpecString(lease["spec"], "holderIdentity") != config_.identity) return false;  // not ours any more
      const std::string now = kubeclient::FormatMicroTime(std::chrono::system_clock::now());
      lease["spec"].erase("holderIdentity");  // no holder: anyone may take it now
      lease["spec"]["leaseDurationSeconds"] = 1;
      lease["spec"]["renewTime"] = now;
      lease["spec"]["acquireTime"] = now;
      return true;
    });
  } catch (const std::exception& e) {
    spdlog::warn("leader election: releasing lease {}/{} failed: {}", config_.ns, config_.lease_name, e.what());
  }
}

void LeaderElector::Run() {
  // Acquire.
  while (!stop_.stopped()) {
    bool ok = false;
    try {
      ok = TryAcquireOrRenew();
    } catch (const std::exception& e) {
      spdlog::warn("leader election: {}", e.what());
    }
    if (ok) break;
    if (!stop_.SleepUnlessStopped(config_.retry_period)) return;
  }
  if (stop_.stopped()) return;
  leading_ = true;
  spdlog::info("leader election: {} is now leading ({}/{})", config_.identity, config_.ns, config_.lease_name);
  if (config_.on_started_leading) config_.on_started_leading();

  // Renew until we fail to for renew_deadline, or are asked to stop.
  auto last_renew = clock_->Now();
  while (!stop_.stopped()) {
    if (!stop_.SleepUnlessStopped(config_.retry_period)) break;
    bool ok = false;
    try {
      ok = TryAcquireOrRenew();
    } catch (const std::exception& e) {
      spdlog::warn("leader election: renew: {}", e.what());
    }
    if (ok) {
      last_renew = clock_->Now();
    } else if (clock_->Now() - last_renew >= config_.renew_deadline) {
      spdlog::warn("leader election: {} failed to renew within {} ms; stopping", config_.identity,
                   config_.renew_deadline.count());
      break;
    }
  }
  leading_ = false;
  if (stop_.stopped()) Release();
  if (config_.on_stopped_leading) config_.on_stopped_leading();
}

}  // namespace headroom::controllerkit
