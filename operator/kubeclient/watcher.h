// Watcher: keeps a consumer in step with the server's set of objects of one kind, the
// way client-go's reflector does. It lists (paginated), hands over the complete set, then
// watches from the list's resourceVersion with bookmarks, handing over each change:
//   - a watch that ends (timeoutSeconds, a dropped connection, a server restart) is
//     re-opened from the last resourceVersion seen — an event or a bookmark — so nothing
//     is missed and nothing is delivered twice;
//   - 410 Gone, as an HTTP status or as an ERROR event carrying a Status with code 410,
//     means that resourceVersion was compacted away: list again and replace everything;
//   - any other failure is retried after a backoff (doubling, capped) until Stop().
// Handlers run on the watcher's own thread, one at a time, in the server's order.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/base/non_copyable.h"
#include "core/base/stop_flag.h"
#include "operator/kubeclient/resource_client.h"

namespace headroom::kubeclient {

struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted };
  Type type;
  nlohmann::json object;
};

// Parses one line of a watch stream. Returns the event type string ("ADDED", ...,
// "BOOKMARK", "ERROR") and the object; throws std::runtime_error on malformed input.
std::pair<std::string, nlohmann::json> ParseWatchLine(const std::string& line);

class Watcher : NonCopyable {
 public:
  struct Options {
    std::string ns;  // "" = all namespaces
    std::string label_selector;
    std::string field_selector;
    int64_t page_size = 500;
    int watch_timeout_seconds = 300;
    std::chrono::milliseconds min_backoff{50};
    std::chrono::milliseconds max_backoff{5000};
  };
  struct Handlers {
    // The complete current set (first sync, and after every relist).
    std::function<void(std::vector<nlohmann::json> items)> on_replace;
    std::function<void(const WatchEvent&)> on_event;
    // Called after a failure that will be retried (for logs and tests); may be empty.
    std::function<void(const std::string& what)> on_error;
  };

  Watcher(ResourceClient client, Options options, Handlers handlers);
  ~Watcher();

  void Start();
  // Ends the open watch and joins the thread. Idempotent.
  void Stop();

  int64_t lists() const { return lists_; }
  int64_t watches() const { return watches_; }
  std::string last_resource_version() const;

 private:
  void Run();
  // One full list: replaces the handlers' view and sets the resourceVersion to watch from.
  void List();
  // One watch from the last resourceVersion until the server ends it; the events delivered.
  // Throws on a failed watch (a 410 Gone as the caller's cue to list again).
  int64_t WatchOnce();
  // One line of the watch stream; true when it was an event for the handlers (not a bookmark).
  bool Dispatch(const std::string& line);
  void Report(const std::string& what);

  ResourceClient client_;
  Options options_;
  Handlers handlers_;
  StreamCanceller canceller_;
  std::thread thread_;
  StopFlag stop_;
  std::atomic<int64_t> lists_{0};
  std::atomic<int64_t> watches_{0};
  mutable std::mutex mu_;  // guards resource_version_
  std::string resource_version_;
};

}  // namespace headroom::kubeclient
