#include "operator/kubeclient/watcher.h"

#include <spdlog/spdlog.h>

namespace headroom::kubeclient {

namespace {
// Thrown from inside the line callback to end a stream that reported 410.
struct GoneSignal {
  std::string message;
};
}  // namespace

std::pair<std::string, nlohmann::json> ParseWatchLine(const std::string& line) {
  auto parsed = nlohmann::json::parse(line, nullptr, false);
  if (!parsed.is_object() || !parsed.contains("type") || !parsed["type"].is_string() || !parsed.contains("object")) {
    throw std::runtime_error("malformed watch event: " + line.substr(0, 200));
  }
  return {parsed["type"].get<std::string>(), std::move(parsed["object"])};
}

Watcher::Watcher(ResourceClient client, Options options, Handlers handlers)
    : client_(std::move(client)), options_(std::move(options)), handlers_(std::move(handlers)) {}

Watcher::~Watcher() { Stop(); }

void Watcher::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Watcher::Stop() {
  if (!stop_.Stop()) {
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
    return;
  }
  canceller_.Cancel();
  if (thread_.joinable()) thread_.join();
}

std::string Watcher::last_resource_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return resource_version_;
}

void Watcher::Report(const std::string& what) {
  spdlog::debug("watch {}: {}", client_.type().plural, what);
  if (handlers_.on_error) handlers_.on_error(what);
}

void Watcher::Run() {
  bool need_list = true;
  std::chrono::milliseconds backoff = options_.min_backoff;
  auto fail = [&](const std::string& what) {
    Report(what);
    if (!stop_.SleepUnlessStopped(backoff)) return;
    backoff = std::min(backoff * 2, options_.max_backoff);
  };
  while (!stop_.stopped()) {
    if (need_list) {
      try {
        List();
        need_list = false;
        backoff = options_.min_backoff;
      } catch (const std::exception& e) {
        fail(std::string("list failed: ") + e.what());
        continue;
      }
    }
    const auto opened = std::chrono::steady_clock::now();
    try {
      const int64_t events = WatchOnce();
      if (stop_.stopped()) break;
      // The server ended the watch. A watch that ends at once with nothing in it would
      // spin; pause a little then.
      if (events == 0 && std::chrono::steady_clock::now() - opened < std::chrono::milliseconds(50)) {
        if (!stop_.SleepUnlessStopped(backoff)) break;
        backoff = std::min(backoff * 2, options_.max_backoff);
      } else {
        backoff = options_.min_backoff;
      }
    } catch (const GoneSignal& gone) {
      Report("relisting: " + gone.message);
      need_list = true;
    } catch (const ApiError& e) {
      if (stop_.stopped()) break;
      if (e.IsGone()) {
        Report(std::string("relisting: ") + e.what());
        need_list = true;
      } else {
        fail(std::string("watch failed: ") + e.what());
      }
    } catch (const std::exception& e) {
      if (stop_.stopped()) break;
      fail(std::string("watch broke: ") + e.what());
    }
  }
}

void Watcher::List() {
  ListOptions list_options;
  list_options.label_selector = options_.label_selector;
  list_options.field_selector = options_.field_selector;
  list_options.limit = options_.page_size;
  nlohmann::json list = client_.ListAll(options_.ns, list_options);
  ++lists_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    resource_version_ = list["metadata"].value("resourceVersion", "");
  }
  std::vector<nlohmann::json> items;
  for (auto& item : list["items"]) items.push_back(std::move(item));
  if (handlers_.on_replace) handlers_.on_replace(std::move(items));
}

int64_t Watcher::WatchOnce() {
  WatchOptions watch_options;
  watch_options.label_selector = options_.label_selector;
  watch_options.field_selector = options_.field_selector;
  watch_options.resource_version = last_resource_version();
  watch_options.timeout_seconds = options_.watch_timeout_seconds;
  int64_t events = 0;
  ++watches_;
  client_.rest().Stream(
      client_.WatchTarget(options_.ns, watch_options),
      [&](const std::string& line) {
    if (Dispatch(line)) ++events;
      },
      canceller_);
  return events;
}

bool Watcher::Dispatch(const std::string& line) {
  auto [type, object] = ParseWatchLine(line);
  if (type == "ERROR") {
    ApiError error = ApiError::FromStatusJson(object.dump(), "watch " + client_.type().plural);
    if (error.IsGone()) throw GoneSignal{error.what()};
    throw error;
  }
  const std::string rv = ResourceVersionOf(object);
  bool delivered = false;
  if (type != "BOOKMARK") {
    WatchEvent event;
    if (type == "ADDED") {
      event.type = WatchEvent::Type::kAdded;
    } else if (type == "MODIFIED") {
      event.type = WatchEvent::Type::kModified;
    } else if (type == "DELETED") {
      event.type = WatchEvent::Type::kDeleted;
    } else {
      throw std::runtime_error("unknown watch event type " + type);
    }
    event.object = std::move(object);
    if (handlers_.on_event) handlers_.on_event(event);
    delivered = true;
  }
  if (!rv.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    resource_version_ = rv;
  }
  return delivered;
}

}  // namespace headroom::kubeclient
