#include "tests/operator/testserver/test_kubelet.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "core/memory/cgroup.h"
#include "core/spec/quantity.h"
#include "operator/kubeclient/rest_client.h"

extern char** environ;

namespace headroom::testserver {

namespace fs = std::filesystem;
using nlohmann::json;

struct TestKubelet::PodProcess {
  std::string ns, name, uid;
  pid_t pid = -1;
  bool exited = false;
  bool deleting = false;
  bool term_sent = false;
  std::chrono::steady_clock::time_point kill_at{};
  std::string started_at;
  std::string dir;
  std::string container;
  bool fallback_to_logs = false;  // terminationMessagePolicy: FallbackToLogsOnError
  std::unique_ptr<memory::MemoryCgroup> cgroup;
};

namespace {

std::string Now() { return kubeclient::FormatTime(std::chrono::system_clock::now()); }

// metadata.labels['key'] and friends.
std::string FieldRef(const json& pod, const std::string& path) {
  const json& meta = pod["metadata"];
  if (path == "metadata.name") return meta.value("name", "");
  if (path == "metadata.namespace") return meta.value("namespace", "");
  if (path == "metadata.uid") return meta.value("uid", "");
  if (path == "spec.nodeName") return pod["spec"].value("nodeName", "");
  if (path == "status.podIP" || path == "status.hostIP") return "127.0.0.1";
  for (const char* map : {"labels", "annotations"}) {
    const std::string prefix = std::string("metadata.") + map + "['";
    if (path.rfind(prefix, 0) == 0 && path.size() > prefix.size() + 2) {
      std::string key = path.substr(prefix.size(), path.size() - prefix.size() - 2);
      if (meta.contains(map) && meta[map].contains(key)) return meta[map][key].get<std::string>();
      return "";
    }
  }
  throw std::runtime_error("unsupported fieldRef " + path);
}

// Kubernetes' $(VAR) expansion: known names are replaced, $$ escapes, unknown stay.
std::string Expand(const std::string& text, const std::map<std::string, std::string>& env) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '$' && i + 1 < text.size() && text[i + 1] == '$') {
      out.push_back('$');
      ++i;
    } else if (text[i] == '$' && i + 1 < text.size() && text[i + 1] == '(') {
      size_t close = text.find(')', i + 2);
      if (close != std::string::npos) {
        std::string name = text.substr(i + 2, close - i - 2);
        auto it = env.find(name);
        if (it != env.end()) {
          out += it->second;
          i = close;
          continue;
        }
      }
      out.push_back(text[i]);
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

// As the kubelet does for FallbackToLogsOnError: the log's last 80 lines, at most 2048 bytes.
std::string ReadLogTail(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() > 2048) text = text.substr(text.size() - 2048);
  std::vector<std::string> lines;
  std::istringstream split(text);
  for (std::string line; std::getline(split, line);) lines.push_back(line);
  std::string tail;
  for (size_t i = lines.size() > 80 ? lines.size() - 80 : 0; i < lines.size(); ++i) tail += lines[i] + "\n";
  return tail;
}

std::string ReadHead(const std::string& path, size_t max) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::string s(max, '\0');
  in.read(s.data(), static_cast<std::streamsize>(max));
  s.resize(static_cast<size_t>(in.gcount()));
  return s;
}

}  // namespace

TestKubelet::TestKubelet(kubeclient::KubeConfig config, Options options)
    : config_(std::move(config)), options_(std::move(options)) {
  if (options_.work_dir.empty()) {
    options_.work_dir =
        (fs::temp_directory_path() / ("headroom-kubelet-" + std::to_string(::getpid()) + "-" + options_.node_name))
            .string();
  }
  fs::create_directories(options_.work_dir);
  kubeclient::RestClientOptions client_options;
  client_options.max_retries = 8;
  client_ = std::make_unique<kubeclient::RestClient>(config_, client_options);
  pods_ = std::make_unique<kubeclient::ResourceClient>(*client_, kubeclient::resources::kPods);
  cgroups_enabled_ = options_.use_memory_cgroups && ::geteuid() == 0 && memory::MemoryCgroup::Supported();
}

TestKubelet::~TestKubelet() { Stop(); }

std::string TestKubelet::PodDir(const std::string& ns, const std::string& name) const {
  return (fs::path(options_.work_dir) / (ns + "_" + name)).string();
}

int TestKubelet::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const auto& [uid, p] : by_uid_) n += p->pid > 0 && !p->exited;
  return n;
}

void TestKubelet::Start() {
  kubeclient::Watcher::Options options;
  options.ns = options_.ns;
  options.min_backoff = std::chrono::milliseconds(10);
  options.max_backoff = std::chrono::milliseconds(500);
  kubeclient::Watcher::Handlers h;
  h.on_replace = [this](std::vector<json> items) {
    for (const auto& pod : items) OnPod(pod);
  };
  h.on_event = [this](const kubeclient::WatchEvent& e) {
    if (e.type == kubeclient::WatchEvent::Type::kDeleted) {
      OnPodGone(e.object);
    } else {
      OnPod(e.object);
    }
  };
  watcher_ = std::make_unique<kubeclient::Watcher>(*pods_, options, h);
  watcher_->Start();
  reaper_ = std::thread([this] { Reaper(); });
}

void TestKubelet::Stop() {
  if (stopping_.exchange(true)) return;
  cv_.notify_all();
  if (watcher_) watcher_->Stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [uid, p] : by_uid_) {
      if (p->pid > 0 && !p->exited) ::kill(-p->pid, SIGKILL);  // its whole process group
    }
  }
  if (reaper_.joinable()) reaper_.join();
  for (auto& t : waiters_) {
    if (t.joinable()) t.join();
  }
}

template <typename F>
void TestKubelet::Retry(const char* what, F&& f) {
  for (int attempt = 0; !stopping_; ++attempt) {
    try {
      f();
      return;
    } catch (const kubeclient::ApiError& e) {
      if (e.IsNotFound() || e.code() == 409) return;  // gone, or another pod of that name now
      if (attempt > 200) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void TestKubelet::OnPod(const json& pod) {
  const std::string ns = kubeclient::Namespace(pod), name = kubeclient::Name(pod), uid = kubeclient::Uid(pod);
  const std::string node = pod["spec"].value("nodeName", "");
  if (node.empty()) {
    if (!options_.claim_unscheduled || pod["metadata"].contains("deletionTimestamp")) return;
    json binding = {{"apiVersion", "v1"},
                    {"kind", "Binding"},
                    {"metadata", {{"name", name}}},
                    {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", options_.node_name}}}};
    Retry("bind", [&] { client_->Request("POST", kubeclient::resources::kPods.Path(ns, name, "binding"), &binding); });
    return;  // the MODIFIED event with nodeName set brings it back here
  }
  if (node != options_.node_name) return;

  std::shared_ptr<PodProcess> p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_uid_.find(uid);
    if (it != by_uid_.end()) p = it->second;
  }
  const bool deleting = pod["metadata"].contains("deletionTimestamp");
  if (!p) {
    const std::string phase = pod.contains("status") ? pod["status"].value("phase", "") : "";
    if (deleting || phase == "Succeeded" || phase == "Failed") {
      if (deleting) Finalize(ns, name, uid);  // nothing of ours runs it: confirm at once
      return;
    }
    StartPod(pod);
    return;
  }
  if (deleting) Terminate(p, pod["metadata"].value("deletionGracePeriodSeconds", int64_t{30}));
}

void TestKubelet::OnPodGone(const json& pod) {
  // Force-deleted (grace 0) while running: the process goes at once.
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_uid_.find(kubeclient::Uid(pod));
  if (it == by_uid_.end()) return;
  it->second->deleting = true;
  if (it->second->pid > 0 && !it->second->exited) ::kill(it->second->pid, SIGKILL);
}

void TestKubelet::StartPod(const json& pod) {
  auto p = std::make_shared<PodProcess>();
  p->ns = kubeclient::Namespace(pod);
  p->name = kubeclient::Name(pod);
  p->uid = kubeclient::Uid(pod);
  p->dir = PodDir(p->ns, p->name);
  fs::create_directories(p->dir);
  // A container's termination log starts empty: an earlier pod of this name may have left one.
  std::error_code ignored;
  fs::remove(p->dir + "/termination-log", ignored);
  const json containers = pod["spec"].value("containers", json::array());
  auto fail = [&](const std::string& reason, const std::string& message) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      p->exited = true;
      by_uid_[p->uid] = p;
    }
    PatchStatus(*p, {{"phase", "Failed"}, {"reason", reason}, {"message", message}});
  };
  if (containers.empty()) return fail("NoContainers", "pod has no containers");
  const json& c = containers[0];
  p->container = c.value("name", "main");
  p->fallback_to_logs = c.value("terminationMessagePolicy", "") == "FallbackToLogsOnError";

  // Environment: the container's, resolved, plus what every headroom worker expects.
  std::map<std::string, std::string> env;
  std::vector<std::string> env_order;
  auto set_env = [&](const std::string& k, const std::string& v) {
    if (!env.count(k)) env_order.push_back(k);
    env[k] = v;
  };
  if (const char* path = std::getenv("PATH")) set_env("PATH", path);
  set_env("HOSTNAME", p->name);
  set_env("HEADROOM_TERMINATION_LOG", p->dir + "/termination-log");
  try {
    for (const auto& e : c.value("env", json::array())) {
      const std::string key = e.value("name", "");
      if (e.contains("value")) {
        set_env(key, Expand(e["value"].get<std::string>(), env));
      } else if (e.contains("valueFrom") && e["valueFrom"].contains("fieldRef")) {
        set_env(key, FieldRef(pod, e["valueFrom"]["fieldRef"].value("fieldPath", "")));
      } else {
        throw std::runtime_error("env " + key + ": only value and valueFrom.fieldRef are supported");
      }
    }
  } catch (const std::exception& e) {
    return fail("CreateContainerConfigError", e.what());
  }
  std::vector<std::string> argv;
  for (const auto& a : c.value("command", json::array())) argv.push_back(Expand(a.get<std::string>(), env));
  for (const auto& a : c.value("args", json::array())) argv.push_back(Expand(a.get<std::string>(), env));
  if (argv.empty()) return fail("ContainerCannotRun", "the test kubelet needs a command (it has no images)");

  int64_t limit = 0;
  if (c.contains("resources") && c["resources"].contains("limits") && c["resources"]["limits"].contains("memory")) {
    const json& q = c["resources"]["limits"]["memory"];
    std::string error;
    auto bytes = spec::ParseQuantityBytes(q.is_string() ? q.get<std::string>() : q.dump(), &error);
    if (!bytes) return fail("CreateContainerConfigError", "limits.memory: " + error);
    limit = *bytes;
  }
  if (cgroups_enabled_ && limit > 0) {
    try {
      p->cgroup = std::make_unique<memory::MemoryCgroup>(
          memory::MemoryCgroup::Create(options_.cgroup_parent + "/" + options_.node_name + "/" + p->ns + "_" + p->name +
                                           "_" + p->uid.substr(p->uid.size() - 6),
                                       limit));
    } catch (const std::exception& e) {
      return fail("CreateContainerError", std::string("memory cgroup: ") + e.what());
    }
  }

  std::vector<std::string> env_strings;
  for (const auto& k : env_order) env_strings.push_back(k + "=" + env[k]);
  std::vector<char*> cargv, cenv;
  for (auto& s : argv) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  for (auto& s : env_strings) cenv.push_back(s.data());
  cenv.push_back(nullptr);
  const std::string log = p->dir + "/container.log";
  int gate[2];
  if (::pipe2(gate, O_CLOEXEC) != 0) return fail("CreateContainerError", "pipe failed");
  std::lock_guard<std::mutex> lock(mu_);  // no exits observed before the pid is recorded
  pid_t pid = ::fork();
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    ::close(gate[1]);
    char byte;
    while (::read(gate[0], &byte, 1) < 0 && errno == EINTR) {
    }
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    if (::chdir(p->dir.c_str()) != 0) _exit(127);
    ::setpgid(0, 0);
    ::execve(cargv[0], cargv.data(), cenv.data());
    ::execvpe(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  ::close(gate[0]);
  if (pid < 0) {
    ::close(gate[1]);
    p->exited = true;
    by_uid_[p->uid] = p;
    return;
  }
  if (p->cgroup) {
    try {
      p->cgroup->AddProcess(pid);  // before it runs a single instruction of the workload
    } catch (...) {
    }
  }
  if (::write(gate[1], "x", 1) != 1) ::kill(pid, SIGKILL);  // cannot release it: do not leave it hanging
  ::close(gate[1]);
  p->pid = pid;
  p->started_at = Now();
  by_uid_[p->uid] = p;
  ++started_;
  waiters_.emplace_back([this, p] { Wait(p); });
  // The Running status is written by the waiter thread, off the watch thread and this lock.
}

void TestKubelet::Wait(std::shared_ptr<PodProcess> p) {
  PatchStatus(*p, {{"phase", "Running"},
                   {"podIP", "127.0.0.1"},
                   {"hostIP", "127.0.0.1"},
                   {"startTime", p->started_at},
                   {"containerStatuses",
                    {{{"name", p->container},
                      {"ready", true},
                      {"restartCount", 0},
                      {"state", {{"running", {{"startedAt", p->started_at}}}}}}}}});
  int status = 0;
  while (::waitpid(p->pid, &status, 0) < 0 && errno == EINTR) {
  }
  int exit_code = 0;
  if (WIFEXITED(status)) {
    exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    exit_code = 128 + WTERMSIG(status);
  }
  std::string reason = exit_code == 0 ? "Completed" : "Error";
  // As containerd reports it: the container failed and its cgroup saw an OOM kill (the
  // victim may be a child of the main process).
  if (exit_code != 0 && p->cgroup && p->cgroup->OomKillCount() > 0) reason = "OOMKilled";
  std::string message = ReadHead(p->dir + "/termination-log", 4096);
  if (message.empty() && exit_code != 0 && p->fallback_to_logs) message = ReadLogTail(p->dir + "/container.log");
  bool deleting;
  {
    std::lock_guard<std::mutex> lock(mu_);
    p->exited = true;
    deleting = p->deleting;
  }
  if (p->cgroup) p->cgroup->Destroy();
  if (stopping_) return;
  json terminated = {{"exitCode", exit_code}, {"reason", reason}, {"startedAt", p->started_at}, {"finishedAt", Now()}};
  if (!message.empty()) terminated["message"] = message;
  PatchStatus(
      *p,
      {{"phase", exit_code == 0 ? "Succeeded" : "Failed"},
       {"containerStatuses",
        {{{"name", p->container}, {"ready", false}, {"restartCount", 0}, {"state", {{"terminated", terminated}}}}}}});
  if (deleting) Finalize(p->ns, p->name, p->uid);
}

void TestKubelet::Terminate(const std::shared_ptr<PodProcess>& p, int64_t grace_seconds) {
  bool finalize_now = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    p->deleting = true;
    if (p->exited) {
      finalize_now = true;
    } else if (!p->term_sent) {
      p->term_sent = true;
      p->kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(grace_seconds);
      ::kill(p->pid, SIGTERM);
    } else {
      p->kill_at = std::min(p->kill_at, std::chrono::steady_clock::now() + std::chrono::seconds(grace_seconds));
    }
  }
  cv_.notify_all();
  if (finalize_now) Finalize(p->ns, p->name, p->uid);
}

void TestKubelet::Reaper() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(20));
    const auto now = std::chrono::steady_clock::now();
    for (auto& [uid, p] : by_uid_) {
      if (p->term_sent && !p->exited && p->pid > 0 && now >= p->kill_at) {
        ::kill(p->pid, SIGKILL);  // the grace period is over
        p->kill_at = now + std::chrono::hours(1);
      }
    }
  }
}

void TestKubelet::Finalize(const std::string& ns, const std::string& name, const std::string& uid) {
  kubeclient::DeleteOptions d;
  d.grace_period_seconds = 0;
  d.precondition_uid = uid;
  Retry("delete", [&] { pods_->Delete(ns, name, d); });
}

void TestKubelet::PatchStatus(const PodProcess& p, const json& status) {
  // The uid makes the patch a precondition, as the kubelet's status manager sends it: a
  // process of a deleted pod never writes its end onto the next pod of that name.
  Retry("status", [&] { pods_->PatchStatus(p.ns, p.name, {{"metadata", {{"uid", p.uid}}}, {"status", status}}); });
}

}  // namespace headroom::testserver
