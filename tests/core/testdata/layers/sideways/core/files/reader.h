// A files header including a folder of its own layer.
#pragma once

#include "core/memory/cgroup.h"
