// Beside it, the operator including core, a lower layer: allowed.
#include "core/spec/training_job.h"
