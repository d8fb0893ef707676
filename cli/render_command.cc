// `headroom render JOB.yaml [--namespace NS]`: the Kubernetes objects the operator would
// create for a job, as multi-document YAML, built by the same code the operator uses
// (operator/manifests/children.h).
#include <iostream>
#include <memory>
#include <string>

#include "core/spec/training_job.h"
#include "cli/command_registry.h"
#include "operator/manifests/children.h"
#include "operator/manifests/gang.h"
#include "operator/manifests/json_yaml.h"

namespace headroom::cli {
namespace {

int RunRender(const std::string& path, const std::string& namespace_flag) {
  spec::ParseResult parsed = spec::ParseTrainingJobFile(path);
  if (!parsed.ok()) {
    for (const auto& e : parsed.errors) std::cerr << path << ": " << e.ToString() << "\n";
    return 2;
  }
  const spec::TrainingJob& job = *parsed.job;
  std::string ns = !namespace_flag.empty()            ? namespace_flag
                   : !job.metadata.namespace_.empty() ? job.metadata.namespace_
                                                      : "default";
  manifests::WorkerGeneration gen;
  gen.job = job;
  gen.generation = 1;
  gen.job.metadata.namespace_ = ns;
  std::vector<nlohmann::json> docs;
  docs.push_back(manifests::BuildSpecConfigMap(gen, ns));
  docs.push_back(manifests::BuildHeadlessService(gen.job, ns));
  // The gang, before its pods, as the operator creates it.
  if (nlohmann::json group = manifests::BuildPodGroup(gen, ns); !group.is_null()) docs.push_back(std::move(group));
  // One pod per ranksPerPod ranks, named after its first rank.
  for (int rank : manifests::PodFirstRanks(job.spec)) docs.push_back(manifests::BuildWorkerPod(gen, rank, ns));
  // The layout as a YAML comment: `headroom render job.yaml | kubectl apply -f -` still works.
  const int k = job.spec.ranks_per_pod;
  const int pods = manifests::PodsPerGeneration(job.spec);
  std::cout << "# " << job.metadata.name << ": " << job.spec.workers << " worker" << (job.spec.workers == 1 ? "" : "s")
            << " as " << pods << " pod" << (pods == 1 ? "" : "s") << " x " << k << " rank" << (k == 1 ? "" : "s")
            << "\n";
  std::cout << manifests::JsonToYamlDocuments(docs);
  return 0;
}

const bool kRegistered = RegisterCommand(
    {"render", "Print, as multi-document YAML, the Kubernetes objects the operator would create for a job",
     [](CLI::App& sub) -> std::function<int()> {
       auto path = std::make_shared<std::string>();
       auto ns = std::make_shared<std::string>();
       sub.add_option("JOB", *path, "TrainingJob YAML file")->required();
       sub.add_option("--namespace,-n", *ns, "namespace (default: the job's, else \"default\")");
       return [path, ns] { return RunRender(*path, *ns); };
     }});

}  // namespace
}  // namespace headroom::cli
