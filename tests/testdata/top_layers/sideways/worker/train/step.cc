// The worker reaching across to the operator, a folder of its own layer: refused.
#include "operator/runtime/job_status.h"
