#include "operator/controllerkit/informer.h"

namespace headroom::controllerkit {

using nlohmann::json;

IndexFunc ControllerUidIndex() {
  return [](const json& object) -> std::vector<std::string> {
    std::string uid = kubeclient::ControllerUid(object);
    if (uid.empty()) return {};
    return {uid};
  };
}

IndexFunc NamespacedLabelIndex(const std::string& label_key) {
  return [label_key](const json& object) -> std::vector<std::string> {
    std::string value = kubeclient::Label(object, label_key);
    if (value.empty()) return {};
    return {kubeclient::Namespace(object) + "/" + value};
  };
}

void Informer::StripManagedFields(json& object) {
  auto meta = object.find("metadata");
  if (meta != object.end() && meta->is_object()) meta->erase("managedFields");
}

Informer::Informer(kubeclient::ResourceClient client, Options options) : options_(std::move(options)) {
  kubeclient::Watcher::Handlers h;
  h.on_replace = [this](std::vector<json> items) { Replace(std::move(items)); };
  h.on_event = [this](const kubeclient::WatchEvent& e) { Apply(e); };
  watcher_ = std::make_unique<kubeclient::Watcher>(std::move(client), options_.watch, std::move(h));
}

Informer::~Informer() { Stop(); }

void Informer::AddEventHandlers(EventHandlers handlers) { handlers_.push_back(std::move(handlers)); }

void Informer::AddIndex(const std::string& name, IndexFunc func) {
  std::lock_guard<std::mutex> lock(mu_);
  index_funcs_[name] = std::move(func);
  indexes_[name];
}

void Informer::Start() {
  watcher_->Start();
  if (options_.resync_period.count() > 0) resync_thread_ = std::thread([this] { ResyncLoop(); });
}

void Informer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  watcher_->Stop();
  if (resync_thread_.joinable()) resync_thread_.join();
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [this] { return synced_.load() || stopping_; });
  return synced_;
}

void Informer::Put(const std::string& key, const json& object) {
  Erase(key);
  items_[key] = object;
  for (auto& [name, func] : index_funcs_) {
    for (const std::string& value : func(object)) indexes_[name][value].insert(key);
  }
}

void Informer::Erase(const std::string& key) {
  auto it = items_.find(key);
  if (it == items_.end()) return;
  for (auto& [name, func] : index_funcs_) {
    for (const std::string& value : func(it->second)) {
      auto& keys = indexes_[name][value];
      keys.erase(key);
      if (keys.empty()) indexes_[name].erase(value);
    }
  }
  items_.erase(it);
}

void Informer::Replace(std::vector<json> items) {
  // Work out what changed against the cache, apply it, then tell the handlers.
  std::vector<json> added;
  std::vector<std::pair<json, json>> updated;
  std::vector<json> deleted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::set<std::string> seen;
    for (json& item : items) {
      if (options_.transform) options_.transform(item);
      const std::string key = kubeclient::KeyOf(item);
      seen.insert(key);
      auto it = items_.find(key);
      if (it == items_.end()) {
        added.push_back(item);
      } else if (kubeclient::ResourceVersionOf(it->second) != kubeclient::ResourceVersionOf(item)) {
        updated.emplace_back(it->second, item);
      }
      Put(key, item);
    }
    std::vector<std::string> gone;
    for (const auto& [key, object] : items_) {
      if (!seen.count(key)) {
        gone.push_back(key);
        deleted.push_back(object);
      }
    }
    for (const auto& key : gone) Erase(key);
  }
  {
    std::lock_guard<std::mutex> dispatch(dispatch_mu_);
    for (const auto& h : handlers_) {
      for (const auto& o : added) {
        if (h.on_add) h.on_add(o);
      }
      for (const auto& [o, n] : updated) {
        if (h.on_update) h.on_update(o, n);
      }
      for (const auto& o : deleted) {
        if (h.on_delete) h.on_delete(o);
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    synced_ = true;
  }
  cv_.notify_all();
}

void Informer::Apply(const kubeclient::WatchEvent& raw) {
  kubeclient::WatchEvent event = raw;
  if (options_.transform) options_.transform(event.object);
  const std::string key = kubeclient::KeyOf(event.object);
  std::optional<json> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = items_.find(key);
    if (it != items_.end()) old = it->second;
    if (event.type == kubeclient::WatchEvent::Type::kDeleted) {
      Erase(key);
    } else {
      Put(key, event.object);
    }
  }
  std::lock_guard<std::mutex> dispatch(dispatch_mu_);
  for (const auto& h : handlers_) {
    if (event.type == kubeclient::WatchEvent::Type::kDeleted) {
      if (h.on_delete) h.on_delete(old ? *old : event.object);
    } else if (old) {
      if (h.on_update) h.on_update(*old, event.object);
    } else {
      if (h.on_add) h.on_add(event.object);
    }
  }
}

void Informer::ResyncLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, options_.resync_period, [this] { return stopping_; });
    if (stopping_ || !synced_) continue;
    std::vector<json> snapshot;
    for (const auto& [key, object] : items_) snapshot.push_back(object);
    lock.unlock();
    {
      std::lock_guard<std::mutex> dispatch(dispatch_mu_);
      for (const auto& h : handlers_) {
        if (!h.on_update) continue;
        for (const auto& o : snapshot) h.on_update(o, o);
      }
    }
    lock.lock();
  }
}

std::optional<json> Informer::Get(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = items_.find(key);
  if (it == items_.end()) return std::nullopt;
  return it->second;
}

std::optional<json> Informer::Get(const std::string& ns, const std::string& name) const {
  return Get(kubeclient::Key(ns, name));
}

std::vector<json> Informer::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<json> out;
  out.reserve(items_.size());
  for (const auto& [key, object] : items_) out.push_back(object);
  return out;
}

std::vector<std::string> Informer::Keys() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [key, object] : items_) out.push_back(key);
  return out;
}

std::vector<json> Informer::ByIndex(const std::string& index, const std::string& value) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<json> out;
  auto idx = indexes_.find(index);
  if (idx == indexes_.end()) throw std::invalid_argument("informer has no index named " + index);
  auto keys = idx->second.find(value);
  if (keys == idx->second.end()) return out;
  for (const auto& key : keys->second) out.push_back(items_.at(key));
  return out;
}

size_t Informer::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return items_.size();
}

}  // namespace headroom::controllerkit
