// A model on a Hugging Face Hub (or a mirror of one) named as users name it elsewhere:
// a repository id ("Qwen/Qwen2.5-0.5B-Instruct"), a revision (branch, tag or commit) and
// the endpoint that serves it. The checks here follow huggingface_hub's own rules, so a
// name it accepts is accepted and one it refuses is refused before anything is fetched.
#pragma once

#include <string>

namespace headroom::hf {

// Where a hub model is fetched from when the spec names no endpoint.
inline constexpr const char* kHubEndpointEnv = "HF_ENDPOINT";
inline constexpr const char* kDefaultHubEndpoint = "https://huggingface.co";

// "" when `repo` is a valid repository id, else why not (one phrase, no trailing period):
// "name" or "namespace/name", each part of letters, digits, '-', '_' and '.', not starting
// or ending with '-' or '.', no "--" or "..", at most 96 characters.
std::string HubRepoIdProblem(const std::string& repo);

// "" when `revision` can name a branch, tag or commit in a URL and under refs/ in the cache
// (non-empty; '/'-separated parts, none empty, "." or ".."; no whitespace, '\\', '?', '#' or '%').
std::string HubRevisionProblem(const std::string& revision);

// "" when `endpoint` is an http:// or https:// URL with a host and no user:password part
// (a credential in the URL would end up in logs and the status).
std::string HubEndpointProblem(const std::string& endpoint);

// The endpoint to use: `spec_endpoint` when set, else $HF_ENDPOINT when set, else
// https://huggingface.co; without trailing '/'.
std::string ResolveHubEndpoint(const std::string& spec_endpoint);

}  // namespace headroom::hf
