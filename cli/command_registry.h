// The `headroom` CLI's subcommands register themselves here, one file per command
// (cli/validate_command.cc, cli/plan_command.cc, ...), so adding a command never
// means editing a shared list.
//
//   static const bool registered = headroom::cli::RegisterCommand({
//       "validate", "Check a TrainingJob file; exit 2 with one line per problem",
//       [](CLI::App& sub) -> std::function<int()> {
//         auto path = std::make_shared<std::string>();
//         sub.add_option("JOB", *path, "TrainingJob YAML")->required();
//         return [path] { return RunValidate(*path); };
//       }});
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace headroom::cli {

struct Command {
  std::string name;
  std::string description;
  // Adds the command's options to `sub` and returns what to run once they are parsed;
  // its return value is the process exit code.
  std::function<std::function<int()>(CLI::App& sub)> setup;
};

bool RegisterCommand(Command command);
const std::vector<Command>& RegisteredCommands();

}  // namespace headroom::cli
