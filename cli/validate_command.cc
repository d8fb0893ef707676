// `headroom validate JOB.yaml`: parse, default and validate a TrainingJob (core/spec).
//
//   valid:   exit 0; prints "JOB.yaml: valid TrainingJob <name>" on stdout
//   invalid: exit 2; prints every problem on stderr, one per line, as SpecError::ToString
//            gives it: "path: message (line N)", the path "<document>" for problems with the
//            document itself (malformed YAML, empty file, unreadable file)
// JOB may be "-" for standard input.
#include <iostream>
#include <iterator>
#include <memory>
#include <string>

#include "core/spec/training_job.h"
#include "cli/command_registry.h"

namespace headroom::cli {
namespace {

int RunValidate(const std::string& path) {
  spec::ParseResult parsed;
  if (path == "-") {
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    parsed = spec::ParseTrainingJob(text);
  } else {
    parsed = spec::ParseTrainingJobFile(path);
  }
  if (!parsed.ok()) {
    for (const spec::SpecError& e : parsed.errors) std::cerr << e.ToString() << "\n";
    return 2;
  }
  std::cout << path << ": valid TrainingJob " << parsed.job->metadata.name << "\n";
  return 0;
}

const bool kRegistered =
    RegisterCommand({"validate", "Check a TrainingJob file; exit 2 with one 'path: message' line per problem",
                     [](CLI::App& sub) -> std::function<int()> {
                       auto path = std::make_shared<std::string>();
                       sub.add_option("JOB", *path, "TrainingJob YAML file, or - for standard input")->required();
                       return [path] { return RunValidate(*path); };
                     }});

}  // namespace
}  // namespace headroom::cli
