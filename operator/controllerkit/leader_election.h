// LeaderElector: one active operator among replicas, decided on a coordination.k8s.io/v1
// Lease, following client-go's leaderelection package:
//   - a candidate tries every retry_period to take the lease: it may when the lease is
//     free (no holder) or the holder has not renewed within lease_duration — measured on
//     our own clock from when we last saw the lease change, never by comparing the
//     holder's timestamps with ours (clocks differ between nodes);
//   - taking it sets holderIdentity, acquireTime, renewTime (MicroTime), bumps
//     leaseTransitions; writes carry the resourceVersion read, so of two candidates racing
//     for the same lease one gets 409 Conflict and loses;
//   - the leader renews every retry_period; when it has not managed to renew for
//     renew_deadline it stops leading (on_stopped_leading) — before lease_duration runs
//     out, so it stops before anyone else may start;
//   - Stop() while leading releases the lease (holderIdentity cleared) so a successor
//     takes over at once instead of waiting out the lease.
// Run() returns after leadership is lost or Stop() is called; as in client-go, a process
// that lost leadership should exit rather than try again with stale state.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "core/base/stop_flag.h"
#include "operator/controllerkit/clock.h"
#include "operator/kubeclient/resource_client.h"

namespace headroom::controllerkit {

struct LeaderElectionConfig {
  std::string ns;
  std::string lease_name;
  std::string identity;  // unique per candidate, e.g. the pod name
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
  std::function<void()> on_started_leading;
  std::function<void()> on_stopped_leading;
  std::function<void(const std::string& identity)> on_new_leader;  // any change of holder
};

class LeaderElector {
 public:
  // Throws std::invalid_argument when the durations are inconsistent
  // (need lease_duration > renew_deadline > retry_period > 0) or names are empty.
  LeaderElector(kubeclient::ResourceClient leases, LeaderElectionConfig config, std::shared_ptr<Clock> clock = nullptr);

  // Blocks: acquire, lead until lost or stopped, release on Stop.
  void Run();
  void Stop();

  bool IsLeader() const { return leading_; }
  // The holder last observed ("" when none).
  std::string Leader() const;

 private:
  // One attempt to take or renew the lease. True when we hold it afterwards.
  bool TryAcquireOrRenew();
  void Release();
  void Observe(const nlohmann::json& lease);

  kubeclient::ResourceClient leases_;
  LeaderElectionConfig config_;
  std::shared_ptr<Clock> clock_;
  std::atomic<bool> leading_{false};
  StopFlag stop_;
  mutable std::mutex mu_;  // guards the observed_ fields
  std::string observed_holder_;
  std::string observed_record_;  // holder + renewTime + rv as last read
  Clock::TimePoint observed_time_{};
  nlohmann::json last_lease_;
};

}  // namespace headroom::controllerkit
