// A protocol header reaching up to the guard: the cycle core/ once had.
#pragma once

#include "core/base/non_copyable.h"
#include "core/guard/forecaster.h"
