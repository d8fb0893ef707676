// The real kubectl against headroom-test-apiserver (the in-process test API server as a
// process, with the TrainingJob controller inside): the server every operator test relies
// on must answer what a real client asks (discovery, OpenAPI v3 field-validation support,
// the Table form with the CRD's printer columns, strict field validation against the CRD's
// schema, the scale subresource, field selectors on Events, cascading deletion). Skipped
// where kubectl is not installed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "operator/manifests/children.h"
#include "tests/helpers/eventually.h"
#include "tests/operator/test_cluster.h"

namespace headroom::trainingjob::testing {
namespace {

namespace fs = std::filesystem;

std::string FindKubectl() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(std::string(path ? path : "") + ":/usr/bin:/usr/local/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (!dir.empty() && Exists(dir + "/kubectl")) return dir + "/kubectl";
  }
  return "";
}

struct Output {
  int code = -1;
  std::string text;  // stdout and stderr together
};

// The test API server (and the operator's controller) in a process of its own.
class ServerProcess {
 public:
  explicit ServerProcess(const std::string& dir) {
    const std::string bin = BinaryPath("headroom-test-apiserver");
    const std::string url_file = dir + "/url";
    const std::string log = dir + "/server.log";
    std::fflush(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      std::freopen(log.c_str(), "a", stdout);
      std::freopen(log.c_str(), "a", stderr);
      ::execl(bin.c_str(), bin.c_str(), "--operator", "--url-file", url_file.c_str(), static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    headroom::testing::Eventually([&] { return fs::exists(url_file); }, std::chrono::seconds(30));
    std::ifstream in(url_file);
    std::getline(in, url_);
  }
  ~ServerProcess() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    if (!headroom::testing::Eventually([&] { return ::waitpid(pid_, nullptr, WNOHANG) == pid_; },
                                       std::chrono::seconds(10))) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  const std::string& url() const { return url_; }

 private:
  pid_t pid_ = -1;
  std::string url_;
};

class KubectlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kubectl_ = FindKubectl();
    if (kubectl_.empty()) GTEST_SKIP() << "kubectl is not installed";
    REQUIRE_BINARY(BinaryPath("headroom-test-apiserver"));
    char pattern[] = "/tmp/headroom-kubectl-XXXXXX";
    dir_ = ::mkdtemp(pattern);
    server_ = std::make_unique<ServerProcess>(dir_);
    ASSERT_FALSE(server_->url().empty()) << "the server never said where it listens (" << dir_ << "/server.log)";
    std::ofstream(dir_ + "/kubeconfig")
        << "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster: {server: \"" << server_->url()
        << "\"}\nusers:\n- name: test\n  user: {}\ncontexts:\n- name: test\n"
        << "  context: {cluster: test, user: test, namespace: default}\n"
        << "current-context: test\n";
  }
  void TearDown() override {
    server_.reset();
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_);
  }

  Output Kubectl(const std::string& args) {
    const std::string command = kubectl_ + " --kubeconfig " + dir_ + "/kubeconfig --cache-dir " + dir_ +
                                "/cache --request-timeout 20s " + args + " 2>&1";
    Output out;
    FILE* p = ::popen(command.c_str(), "r");
    if (p == nullptr) return out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.text.append(buf, n);
    const int status = ::pclose(p);
    out.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return out;
  }
  // Names from `kubectl get <what> -o name`, one a line.
  std::vector<std::string> Names(const std::string& what) {
    Output o = Kubectl("get " + what + " -o name");
    std::vector<std::string> names;
    std::stringstream lines(o.text);
    std::string line;
    while (std::getline(lines, line)) {
      if (!line.empty()) names.push_back(line);
    }
    return names;
  }
  std::string kubectl_;
  std::string dir_;
  std::unique_ptr<ServerProcess> server_;
};

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_F(KubectlTest, AppliesGetsScalesDescribesAndDeletesATrainingJob) {
  const std::string crd = std::string(HEADROOM_SOURCE_DIR) + "/crds/headroom.dev_trainingjobs.yaml";
  Output o = Kubectl("apply -f " + crd);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(Contains(o.text, "customresourcedefinition.apiextensions.k8s.io/trainingjobs.headroom.dev created"))
      << o.text;

  const std::string job_file = dir_ + "/job.yaml";
  std::ofstream(job_file) << spec::ToYaml(
      *spec::ParseTrainingJobJson(JobObject(JobShape{.name = "demo", .workers = 2})).job);
  o = Kubectl("apply -f " + job_file);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(Contains(o.text, "trainingjob.headroom.dev/demo created")) << o.text;

  // Fields the CRD's schema does not declare: kubectl asks for strict field validation
  // and the server refuses, naming the field.
  const std::string bad_file = dir_ + "/bad.yaml";
  std::ofstream(bad_file) << "apiVersion: headroom.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: bad}\n"
                          << "spec: {workers: 1, notAField: 1}\n";
  o = Kubectl("apply -f " + bad_file);
  EXPECT_NE(o.code, 0) << o.text;
  EXPECT_TRUE(Contains(o.text, "unknown field \"spec.notAField\"")) << o.text;
  EXPECT_TRUE(Names("trainingjobs").size() == 1) << Kubectl("get trainingjobs").text;

  // The operator inside the server made the job's children.
  const std::string selector = std::string(" -l ") + manifests::kLabelJobName + "=demo";
  ASSERT_TRUE(
      headroom::testing::Eventually([&] { return Names("pods" + selector).size() == 2; }, std::chrono::seconds(30)))
      << Kubectl("get pods").text;
  EXPECT_EQ(Kubectl("get service " + manifests::ServiceName("demo")).code, 0);
  EXPECT_EQ(Kubectl("get configmap " + manifests::SpecConfigMapName("demo")).code, 0);

  // The table has the CRD's printer columns, as the server read them from the CRD applied.
  o = Kubectl("get crd trainingjobs.headroom.dev -o jsonpath={.spec.versions[0].additionalPrinterColumns[*].name}");
  ASSERT_EQ(o.code, 0) << o.text;
  std::stringstream column_names(o.text);
  std::vector<std::string> columns{"NAME"};
  for (std::string c; column_names >> c;) {
    for (char& ch : c) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    columns.push_back(c);
  }
  ASSERT_GT(columns.size(), 2u) << o.text;
  o = Kubectl("get trainingjobs");
  ASSERT_EQ(o.code, 0) << o.text;
  std::stringstream table(o.text);
  std::string header_line, row_line;
  std::getline(table, header_line);
  std::getline(table, row_line);
  std::stringstream header(header_line);
  std::vector<std::string> printed;
  for (std::string c; header >> c;) printed.push_back(c);
  EXPECT_EQ(printed, columns) << o.text;
  EXPECT_EQ(row_line.rfind("demo ", 0), 0u) << o.text;
  EXPECT_EQ(Kubectl("get tj demo -o name").text, "trainingjob.headroom.dev/demo\n") << "the short name resolves";

  // kubectl scale goes through the scale subresource. First to a size the batch does not
  // divide: the job fails with a condition and an Event saying why, and describe shows both.
  o = Kubectl("scale trainingjob demo --replicas=3 -v=6");
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(Contains(
      o.text, "PATCH " + server_->url() + "/apis/headroom.dev/v1alpha1/namespaces/default/trainingjobs/demo/scale?"))
      << o.text;
  EXPECT_EQ(Kubectl("get trainingjob demo --subresource=scale -o jsonpath={.spec.replicas}").text, "3");
  EXPECT_EQ(Kubectl("get trainingjob demo -o jsonpath={.spec.workers}").text, "3");
  ASSERT_TRUE(headroom::testing::Eventually(
      [&] { return Kubectl("get trainingjob demo -o jsonpath={.status.phase}").text == "Failed"; },
      std::chrono::seconds(30)));
  o = Kubectl("describe trainingjob demo");
  ASSERT_EQ(o.code, 0) << o.text;
  const size_t conditions = o.text.find("Conditions:");
  const size_t events = o.text.find("\nEvents:");
  ASSERT_NE(conditions, std::string::npos) << o.text;
  ASSERT_NE(events, std::string::npos) << o.text;
  ASSERT_LT(conditions, events) << o.text;
  const std::string condition = o.text.substr(conditions, events - conditions);
  EXPECT_TRUE(Contains(condition, "InvalidSpec")) << o.text;
  EXPECT_TRUE(Contains(condition, "Failed")) << o.text;
  EXPECT_TRUE(Contains(o.text.substr(events), "Launched")) << o.text;
  EXPECT_TRUE(Contains(o.text.substr(events), "InvalidSpec")) << o.text;

  // Then to a size that works: the operator launches 4 pods.
  ASSERT_EQ(Kubectl("scale trainingjob demo --replicas=4").code, 0);
  EXPECT_TRUE(
      headroom::testing::Eventually([&] { return Names("pods" + selector).size() == 4; }, std::chrono::seconds(30)))
      << Kubectl("get pods").text << Kubectl("describe trainingjob demo").text;

  // Deleting the job takes its pods, Service and ConfigMap with it (ownerReferences).
  o = Kubectl("delete trainingjob demo");
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(Contains(o.text, "trainingjob.headroom.dev \"demo\" deleted")) << o.text;
  EXPECT_TRUE(Names("trainingjobs").empty());
  EXPECT_TRUE(Names("pods").empty()) << Kubectl("get pods").text;
  EXPECT_TRUE(Names("services").empty()) << Kubectl("get services").text;
  EXPECT_TRUE(Names("configmaps").empty()) << Kubectl("get configmaps").text;
}

// With Volcano's PodGroup CRD installed and schedulerName volcano, the gang is a kind
// kubectl lists like any other (`kubectl get podgroups`, the CRD's columns), created before
// the pods, and `kubectl delete` of the job takes it with the pods.
TEST_F(KubectlTest, GetPodgroupsShowsTheGangAndDeleteTakesIt) {
  const std::string source = HEADROOM_SOURCE_DIR;
  ASSERT_EQ(Kubectl("apply -f " + source + "/crds/headroom.dev_trainingjobs.yaml").code, 0);
  Output o = Kubectl("apply -f " + source + "/tests/operator/testdata/volcano-podgroup-crd.yaml");
  ASSERT_EQ(o.code, 0) << o.text;

  json object = JobObject(JobShape{.name = "gang", .workers = 2});
  object["spec"]["template"] = {{"spec", {{"schedulerName", "volcano"}}}};
  const std::string job_file = dir_ + "/gang.yaml";
  std::ofstream(job_file) << spec::ToYaml(*spec::ParseTrainingJobJson(object).job);
  o = Kubectl("apply -f " + job_file);
  ASSERT_EQ(o.code, 0) << o.text;

  const std::string selector = std::string(" -l ") + manifests::kLabelJobName + "=gang";
  ASSERT_TRUE(
      headroom::testing::Eventually([&] { return Names("pods" + selector).size() == 2; }, std::chrono::seconds(30)))
      << Kubectl("get pods").text;
  o = Kubectl("get podgroups");
  ASSERT_EQ(o.code, 0) << o.text;
  std::stringstream table(o.text);
  std::string header, row;
  std::getline(table, header);
  std::getline(table, row);
  EXPECT_TRUE(Contains(header, "MINMEMBER")) << o.text;
  EXPECT_EQ(row.rfind("gang-g1 ", 0), 0u) << o.text;
  EXPECT_EQ(Kubectl("get pg gang-g1 -o jsonpath={.spec.minMember}").text, "2");
  EXPECT_EQ(
      Kubectl("get pod gang-worker-1 -o 'jsonpath={.metadata.annotations.scheduling\\.k8s\\.io/group-name}'").text,
      "gang-g1");

  o = Kubectl("delete trainingjob gang");
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(Names("podgroups").empty()) << Kubectl("get podgroups").text;
  EXPECT_TRUE(Names("pods").empty()) << Kubectl("get pods").text;
}

}  // namespace
}  // namespace headroom::trainingjob::testing
