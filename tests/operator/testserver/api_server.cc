#include "tests/operator/testserver/api_server.h"

#include "core/net/free_port.h"
#include "tests/operator/testserver/discovery.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <vector>

#include <boost/asio/ssl.hpp>
#include <cpprest/http_listener.h>
#include <cpprest/producerconsumerstream.h>

namespace headroom::testserver {

namespace http = web::http;
using nlohmann::json;

namespace {

// One open watch response: events are appended to `buffer`, which cpprest's listener
// drains into the chunked HTTP body. sync() after each line makes the listener send it
// now rather than when its chunk fills.
struct WatchConn {
  concurrency::streams::producer_consumer_buffer<uint8_t> buffer;
  std::mutex mu;
  bool closed = false;
  int64_t subscription = 0;
  int events = 0;
  bool bookmarks = false;
  std::chrono::steady_clock::time_point deadline;
  std::chrono::steady_clock::time_point next_bookmark;

  bool Write(const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    if (closed) return false;
    uint8_t* p = buffer.alloc(line.size() + 1);
    if (p == nullptr) {
      closed = true;
      return false;
    }
    std::memcpy(p, line.data(), line.size());
    p[line.size()] = '\n';
    buffer.commit(line.size() + 1);
    buffer.sync().wait();
    return true;
  }
  void Close() {
    std::lock_guard<std::mutex> lock(mu);
    if (closed) return;
    closed = true;
    buffer.close(std::ios_base::out).wait();
  }
  bool is_closed() {
    std::lock_guard<std::mutex> lock(mu);
    return closed;
  }
};

json StatusJson(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
          {"status", "Failure"}, {"message", message}, {"reason", reason},
          {"code", code}};
}

std::string Decode(const std::string& s) { return web::uri::decode(s); }

}  // namespace

struct TestApiServer::Impl {
  explicit Impl(TestApiServer* server) : server(server) {}
  TestApiServer* server;
  std::unique_ptr<http::experimental::listener::http_listener> listener;
  std::mutex mu;
  std::map<int64_t, std::shared_ptr<WatchConn>> watches;
  FaultOptions faults;
  std::mt19937_64 rng{1};
  bool force_gone = false;
  bool gone_as_http = false;
  std::set<std::string> tokens;  // accepted bearer tokens; empty = no authentication
  std::thread janitor;
  bool stopping = false;
  std::condition_variable cv;

  double Uniform() {
    std::lock_guard<std::mutex> lock(mu);
    return std::uniform_real_distribution<double>(0, 1)(rng);
  }

  void Route(http::http_request req);
  void Serve(http::http_request& req);
  void Watch(http::http_request& req, const ResourceInfo& r, const std::string& ns,
             const std::map<std::string, std::string>& query);
  void Janitor();
};

TestApiServer::TestApiServer(TestApiServerOptions options)
    : options_(std::move(options)), store_(options_.history_window), impl_(std::make_unique<Impl>(this)) {
  store_.RegisterDefaults();
  if (!options_.required_token.empty()) impl_->tokens = {options_.required_token};
}

TestApiServer::~TestApiServer() { Stop(); }

kubeclient::KubeConfig TestApiServer::ClientConfig(const std::string& ns) const {
  kubeclient::KubeConfig config;
  config.server = url_;
  config.ca_pem = options_.ca_pem;
  config.ns = ns;
  config.token = impl_->tokens.empty() ? "" : *impl_->tokens.begin();
  config.source = "test API server " + url_;
  return config;
}

void TestApiServer::SetFaults(const FaultOptions& faults) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->faults = faults;
  impl_->rng.seed(faults.seed);
}

void TestApiServer::ForceGoneOnNextWatch(bool as_http_status) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->force_gone = true;
  impl_->gone_as_http = as_http_status;
}

void TestApiServer::SetRequiredToken(const std::string& token) { SetAcceptedTokens({token}); }

void TestApiServer::SetAcceptedTokens(const std::set<std::string>& tokens) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->tokens = tokens;
}

int TestApiServer::open_watches() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  int n = 0;
  for (auto& [id, conn] : impl_->watches) n += conn->is_closed() ? 0 : 1;
  return n;
}

void TestApiServer::DropAllWatches() {
  std::vector<std::shared_ptr<WatchConn>> conns;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (auto& [id, conn] : impl_->watches) conns.push_back(conn);
  }
  for (auto& conn : conns) {
    store_.Unsubscribe(conn->subscription);
    conn->Close();
  }
}

void TestApiServer::Start() {
  using http::experimental::listener::http_listener;
  using http::experimental::listener::http_listener_config;
  const bool tls = !options_.server_cert_pem.empty();
  http_listener_config config;
  if (tls) {
    const TestApiServerOptions opts = options_;
    config.set_ssl_context_callback([opts](boost::asio::ssl::context& ctx) {
      ctx.use_certificate_chain(boost::asio::buffer(opts.server_cert_pem.data(), opts.server_cert_pem.size()));
      ctx.use_private_key(boost::asio::buffer(opts.server_key_pem.data(), opts.server_key_pem.size()),
                          boost::asio::ssl::context::pem);
      if (!opts.client_ca_pem.empty()) {
        ctx.add_certificate_authority(boost::asio::buffer(opts.client_ca_pem.data(), opts.client_ca_pem.size()));
        ctx.set_verify_mode(boost::asio::ssl::verify_peer | boost::asio::ssl::verify_fail_if_no_peer_cert);
      }
    });
  }
  std::string last_error;
  for (int attempt = 0; attempt < (options_.port > 0 ? 1 : 20) && !impl_->listener; ++attempt) {
    const int port = options_.port > 0 ? options_.port : net::FreePort();
    const std::string url = std::string(tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(port);
    auto listener = std::make_unique<http_listener>(url, config);
    listener->support([impl = impl_.get()](http::http_request req) { impl->Route(std::move(req)); });
    try {
      listener->open().wait();
      impl_->listener = std::move(listener);
      url_ = url;
    } catch (const std::exception& e) {
      last_error = e.what();
    }
  }
  if (!impl_->listener) throw std::runtime_error("test API server could not listen: " + last_error);
  impl_->janitor = std::thread([impl = impl_.get()] { impl->Janitor(); });
}

void TestApiServer::Stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopping || !impl_->listener) return;
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->janitor.joinable()) impl_->janitor.join();
  DropAllWatches();
  try {
    impl_->listener->close().wait();
  } catch (const std::exception& e) {
    (void)e;  // closing a listener that lost its socket: nothing left to do
  }
}

void TestApiServer::Impl::Janitor() {
  const auto interval = server->options_.bookmark_interval;
  std::unique_lock<std::mutex> lock(mu);
  while (!stopping) {
    cv.wait_for(lock, std::chrono::milliseconds(20));
    std::vector<std::pair<int64_t, std::shared_ptr<WatchConn>>> conns(watches.begin(), watches.end());
    lock.unlock();
    const auto now = std::chrono::steady_clock::now();
    std::vector<int64_t> finished;
    for (auto& [id, conn] : conns) {
      if (conn->is_closed()) {
        server->store_.Unsubscribe(conn->subscription);
        finished.push_back(id);
        continue;
      }
      if (now >= conn->deadline) {
        // The watch's timeoutSeconds ran out: a last bookmark, then the end of the body.
        if (conn->bookmarks) server->store_.Bookmark(conn->subscription);
        server->store_.Unsubscribe(conn->subscription);
        conn->Close();
        finished.push_back(id);
      } else if (conn->bookmarks && now >= conn->next_bookmark) {
        server->store_.Bookmark(conn->subscription);
        conn->next_bookmark = now + interval;
      }
    }
    lock.lock();
    for (int64_t id : finished) watches.erase(id);
  }
}

void TestApiServer::Impl::Route(http::http_request req) {
  ++server->requests_;
  try {
    Serve(req);
  } catch (const StoreError& e) {
    req.reply(e.code, StatusJson(e.code, e.reason, e.what()).dump(), "application/json");
  } catch (const std::exception& e) {
    req.reply(500, StatusJson(500, "InternalError", e.what()).dump(), "application/json");
  }
}

void TestApiServer::Impl::Serve(http::http_request& req) {
  FaultOptions f;
  std::set<std::string> accepted;
  bool gone = false, gone_http = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    f = faults;
    accepted = tokens;
  }
  if (f.latency.count() > 0) std::this_thread::sleep_for(f.latency);

  if (!accepted.empty()) {
    const auto& headers = req.headers();
    std::string auth = headers.has("Authorization") ? headers.find("Authorization")->second : "";
    if (auth.rfind("Bearer ", 0) != 0 || !accepted.count(auth.substr(7))) {
      throw StoreError(401, "Unauthorized", "Unauthorized");
    }
  }

  const std::string method = req.method();
  const auto uri = req.relative_uri();
  std::vector<std::string> parts = web::uri::split_path(uri.path());
  for (auto& p : parts) p = Decode(p);
  std::map<std::string, std::string> query;
  for (const auto& [k, v] : web::uri::split_query(uri.query())) query[Decode(k)] = Decode(v);

  if (f.error_fraction > 0 && Uniform() < f.error_fraction) {
    ++server->injected_faults_;
    if (Uniform() < 0.5) throw StoreError(500, "InternalError", "injected fault: internal error");
    throw StoreError(429, "TooManyRequests", "injected fault: too many requests");
  }

  auto ok = [&req](int code, const json& object) { req.reply(code, object.dump(), "application/json"); };
  const std::string accept = req.headers().has("Accept") ? req.headers().find("Accept")->second : "";
  // Discovery: what clients such as kubectl read to map a kind or a short name to a path.
  if (method == "GET") {
    const std::vector<ResourceInfo> kinds = server->store_.Resources();
    if (parts.size() == 1 && parts[0] == "version") return ok(200, VersionInfo());
    if (parts.size() == 1 && parts[0] == "api")
      return ok(200, ApiVersions(server->url_.substr(server->url_.find("//") + 2)));
    if (parts.size() == 1 && parts[0] == "apis") return ok(200, ApiGroupList(kinds));
    std::optional<json> doc;
    if (parts.size() == 2 && parts[0] == "api") doc = ApiResourceList(kinds, "", parts[1]);
    if (parts.size() == 2 && parts[0] == "apis") doc = ApiGroup(kinds, parts[1]);
    if (parts.size() == 3 && parts[0] == "apis") doc = ApiResourceList(kinds, parts[1], parts[2]);
    if (parts.size() == 2 && parts[0] == "openapi" && parts[1] == "v3") doc = OpenApiV3Root(kinds);
    if (parts.size() == 4 && parts[0] == "openapi" && parts[1] == "v3" && parts[2] == "api") {
      doc = OpenApiV3Document(kinds, "", parts[3]);
    }
    if (parts.size() == 5 && parts[0] == "openapi" && parts[1] == "v3" && parts[2] == "apis") {
      doc = OpenApiV3Document(kinds, parts[3], parts[4]);
    }
    if (doc) return ok(200, *doc);
  }

  // /api/v1/... or /apis/<group>/<version>/...
  size_t i = 0;
  std::string group, version;
  if (parts.size() >= 2 && parts[0] == "api") {
    version = parts[1];
    i = 2;
  } else if (parts.size() >= 3 && parts[0] == "apis") {
    group = parts[1];
    version = parts[2];
    i = 3;
  } else {
    throw StoreError(404, "NotFound", "the server could not find the requested resource");
  }
  std::string ns;
  if (parts.size() > i + 1 && parts[i] == "namespaces" && parts.size() > i + 2) {
    ns = parts[i + 1];
    i += 2;
  }
  if (i >= parts.size()) throw StoreError(404, "NotFound", "the server could not find the requested resource");
  const ResourceInfo* found = server->store_.Find(group, version, parts[i]);
  if (!found)
    throw StoreError(404, "NotFound", "the server could not find the requested resource (" + uri.path() + ")");
  const ResourceInfo r = *found;
  const std::string name = parts.size() > i + 1 ? parts[i + 1] : "";
  const std::string sub = parts.size() > i + 2 ? parts[i + 2] : "";
  if (parts.size() > i + 3) throw StoreError(404, "NotFound", "the server could not find the requested resource");
  if (r.namespaced && ns.empty() && !(method == "GET" && name.empty())) {
    throw StoreError(404, "NotFound", "namespaced resource " + r.plural + " needs a namespace in the path");
  }
  if (!sub.empty() && !((sub == "status" && r.status_subresource) || (sub == "scale" && r.scale_subresource) ||
                        ((sub == "binding" || sub == "eviction") && r.plural == "pods" && r.group.empty()))) {
    throw StoreError(404, "NotFound", "the server could not find the requested resource (" + sub + ")");
  }

  auto body = [&req]() {
    std::string text = req.extract_utf8string(true).get();
    if (text.empty()) return json::object();
    auto parsed = json::parse(text, nullptr, false);
    if (parsed.is_discarded()) throw StoreError(400, "BadRequest", "request body is not valid JSON");
    return parsed;
  };
  // A custom resource's body (or merge patch) decoded as a real server does: fields its
  // CRD's schema does not declare are dropped, or refused under fieldValidation=Strict.
  auto decoded = [&](json object) {
    const std::string content_type = req.headers().content_type();
    if (!r.custom || content_type.rfind("application/json-patch+json", 0) == 0) return object;
    const std::vector<std::string> unknown = PruneUnknownFields(object, server->store_.CrdOf(r), r.version);
    if (!unknown.empty() && query["fieldValidation"] == "Strict") {
      std::string fields;
      for (const std::string& f : unknown) fields += (fields.empty() ? "" : ", ") + ("unknown field \"" + f + "\"");
      throw StoreError(400, "BadRequest",
                       r.kind + " in version \"" + r.version + "\" cannot be handled as a " + r.kind +
                           ": strict decoding error: " + fields);
    }
    return object;
  };
  const bool write = method != "GET";
  if (write) ++server->write_requests_;
  ObjectStore& store = server->store_;

  if (method == "GET" && name.empty()) {
    const auto w = query.find("watch");
    if (w != query.end() && (w->second == "true" || w->second == "1")) {
      {
        std::lock_guard<std::mutex> lock(mu);
        gone = force_gone;
        gone_http = gone_as_http;
        force_gone = false;
      }
      if (gone && gone_http) throw StoreError(410, "Expired", "injected: too old resource version");
      if (gone) {
        json event = {{"type", "ERROR"}, {"object", StatusJson(410, "Expired", "injected: too old resource version")}};
        req.reply(200, event.dump() + "\n", "application/json");
        return;
      }
      Watch(req, r, ns, query);
      return;
    }
    int64_t limit = query.count("limit") ? std::stoll(query["limit"]) : 0;
    LabelSelector labels;
    FieldSelector fields;
    try {
      labels = LabelSelector::Parse(query["labelSelector"]);
      fields = FieldSelector::Parse(query["fieldSelector"]);
    } catch (const std::invalid_argument& e) {
      throw StoreError(400, "BadRequest", e.what());
    }
    json list = store.List(r, ns, labels, fields, limit, query["continue"]);
    if (WantsTable(accept)) {
      json table = ToTable(r, list["items"].get<std::vector<json>>(), store.CrdOf(r),
                           list["metadata"].value("resourceVersion", ""));
      if (list["metadata"].contains("continue")) table["metadata"]["continue"] = list["metadata"]["continue"];
      return ok(200, table);
    }
    ok(200, list);
  } else if (method == "GET" && sub.empty()) {
    json object = store.Get(r, ns, name);
    if (WantsTable(accept)) {
      return ok(200, ToTable(r, {object}, store.CrdOf(r), object["metadata"].value("resourceVersion", "")));
    }
    ok(200, object);
  } else if (method == "GET" && sub == "scale") {
    ok(200, store.GetScale(r, ns, name));
  } else if (method == "GET" && sub == "status") {
    ok(200, store.Get(r, ns, name));
  } else if (method == "POST" && name.empty()) {
    ok(201, store.Create(r, ns, decoded(body())));
  } else if (method == "POST" && sub == "binding") {
    json binding = body();
    std::string node = binding.contains("target") ? binding["target"].value("name", "") : "";
    if (node.empty()) throw StoreError(422, "Invalid", "Binding.target.name: Required value");
    store.Bind(ns, name, node);
    ok(201, {{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Success"}, {"code", 201}});
  } else if (method == "POST" && sub == "eviction") {
    // policy/v1 Eviction: {metadata: {name}, deleteOptions: {gracePeriodSeconds, ...}}.
    json eviction = body();
    StoreDeleteOptions d;
    if (eviction.contains("deleteOptions") && eviction["deleteOptions"].is_object()) {
      const json& o = eviction["deleteOptions"];
      if (o.contains("gracePeriodSeconds")) d.grace_period_seconds = o["gracePeriodSeconds"].get<int64_t>();
      if (o.contains("preconditions")) d.precondition_uid = o["preconditions"].value("uid", "");
    }
    ok(201, store.Evict(ns, name, d));
  } else if (method == "PUT" && sub == "scale") {
    ok(200, store.UpdateScale(r, ns, name, body()));
  } else if (method == "PATCH" && sub == "scale") {
    // A patch of the Scale object (what `kubectl scale` sends), applied to the current one.
    json scale = store.GetScale(r, ns, name);
    const std::string type = req.headers().content_type();
    if (type.rfind("application/json-patch+json", 0) == 0) {
      try {
        scale = scale.patch(body());
      } catch (const std::exception& e) {
        throw StoreError(422, "Invalid", std::string("json patch failed: ") + e.what());
      }
    } else if (type.rfind("application/merge-patch+json", 0) == 0 ||
               type.rfind("application/strategic-merge-patch+json", 0) == 0) {
      scale.merge_patch(body());
    } else {
      throw StoreError(415, "UnsupportedMediaType", "unsupported patch type " + type);
    }
    ok(200, store.UpdateScale(r, ns, name, scale));
  } else if (method == "PUT" && !name.empty()) {
    ok(200, store.Update(r, ns, name, decoded(body()), sub));
  } else if (method == "PATCH" && !name.empty() && sub != "scale") {
    std::string type = req.headers().content_type();
    ok(200, store.Patch(r, ns, name, decoded(body()), type, sub));
  } else if (method == "DELETE" && !name.empty() && sub.empty()) {
    json opts = body();
    StoreDeleteOptions d;
    if (opts.contains("gracePeriodSeconds")) d.grace_period_seconds = opts["gracePeriodSeconds"].get<int64_t>();
    if (query.count("gracePeriodSeconds")) d.grace_period_seconds = std::stoll(query["gracePeriodSeconds"]);
    d.propagation_policy =
        opts.value("propagationPolicy", query.count("propagationPolicy") ? query["propagationPolicy"] : "");
    if (opts.contains("preconditions")) {
      d.precondition_uid = opts["preconditions"].value("uid", "");
      d.precondition_resource_version = opts["preconditions"].value("resourceVersion", "");
    }
    ok(200, store.Delete(r, ns, name, d));
  } else {
    throw StoreError(405, "MethodNotAllowed", method + " is not supported on " + uri.path());
  }
}

void TestApiServer::Impl::Watch(http::http_request& req, const ResourceInfo& r, const std::string& ns,
                                const std::map<std::string, std::string>& query) {
  auto get = [&](const char* key) {
    auto it = query.find(key);
    return it == query.end() ? std::string() : it->second;
  };
  LabelSelector labels;
  FieldSelector fields;
  try {
    labels = LabelSelector::Parse(get("labelSelector"));
    fields = FieldSelector::Parse(get("fieldSelector"));
  } catch (const std::invalid_argument& e) {
    throw StoreError(400, "BadRequest", e.what());
  }
  auto conn = std::make_shared<WatchConn>();
  const std::string timeout = get("timeoutSeconds");
  const auto now = std::chrono::steady_clock::now();
  conn->deadline = now + std::chrono::seconds(timeout.empty() ? 1800 : std::stoll(timeout));
  conn->bookmarks = get("allowWatchBookmarks") == "true";
  conn->next_bookmark = now + server->options_.bookmark_interval;
  std::weak_ptr<WatchConn> weak = conn;
  auto sink = [this, weak](const std::string& type, const json& object) {
    auto c = weak.lock();
    if (!c) return false;
    if (!c->Write(json{{"type", type}, {"object", object}}.dump())) return false;
    if (type == "BOOKMARK") return true;
    ++c->events;
    FaultOptions f;  // the faults in force now, so SetFaults reaches watches already open
    {
      std::lock_guard<std::mutex> lock(mu);
      f = faults;
    }
    bool drop = (f.drop_watch_after_events > 0 && c->events >= f.drop_watch_after_events) ||
                (f.drop_watch_probability > 0 && Uniform() < f.drop_watch_probability);
    if (drop) {
      c->Close();
      return false;
    }
    return true;
  };
  try {
    conn->subscription = server->store_.Subscribe(r, ns, get("resourceVersion"), labels, fields, sink);
  } catch (const StoreError& e) {
    if (e.code != 410) throw;
    // A real server reports an expired resourceVersion inside the stream.
    json event = {{"type", "ERROR"}, {"object", StatusJson(410, e.reason, e.what())}};
    req.reply(200, event.dump() + "\n", "application/json");
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    watches[conn->subscription] = conn;
  }
  http::http_response response(200);
  response.set_body(concurrency::streams::istream(conn->buffer), "application/json");
  req.reply(response);
}

}  // namespace headroom::testserver
