// The local runtime reaching up for the command line: the check must refuse it.
#include "cli/command_registry.h"
