// An operator file reaching up for the local runtime: the check must refuse it.
#include "local/local_run.h"
