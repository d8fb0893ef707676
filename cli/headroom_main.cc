// `headroom`: validate, plan, run, render and replay TrainingJobs (docs/design.md, Commands).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <iostream>
#include <memory>

#include "cli/command_registry.h"

namespace headroom::cli {

namespace {
std::vector<Command>& Registry() {
  static std::vector<Command> commands;
  return commands;
}
}  // namespace

bool RegisterCommand(Command command) {
  Registry().push_back(std::move(command));
  return true;
}

const std::vector<Command>& RegisteredCommands() { return Registry(); }

}  // namespace headroom::cli

int main(int argc, char** argv) {
  using headroom::cli::Command;
  CLI::App app{"headroom: GRPO fine-tuning that forecasts memory and acts before an OOM kill"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "headroom 0.1.0");

  std::vector<Command> commands = headroom::cli::RegisteredCommands();
  std::sort(commands.begin(), commands.end(), [](const Command& a, const Command& b) { return a.name < b.name; });
  std::function<int()> action;
  for (const Command& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    auto run = std::make_shared<std::function<int()>>(c.setup(*sub));
    sub->callback([run, &action] { action = *run; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 exits 0 for --help/--version; usage errors are exit 2 like a bad spec.
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    return action ? action() : 2;
  } catch (const std::exception& e) {
    std::cerr << "headroom: " << e.what() << "\n";
    return 1;
  }
}
