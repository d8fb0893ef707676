// The operator's scrape of a worker's /metrics: core/net/http_get.h's GET with a hard
// deadline (shared with a pod's launcher, which gathers its ranks' series).
#pragma once

#include "core/net/http_get.h"

namespace headroom::trainingjob {

using net::HttpGet;

}  // namespace headroom::trainingjob
