// What `kubectl` asks a server before and beside the object paths, answered from the
// ObjectStore's registered kinds the way a real API server does:
//   - /version; /api (APIVersions) and /apis (APIGroupList); /api/v1 and
//     /apis/<group>/<version> (APIResourceList, subresources included, so `kubectl scale`
//     finds <plural>/scale);
//   - the Table form of a list or object (Accept: ...;as=Table;g=meta.k8s.io;v=v1), its
//     columns a custom resource's additionalPrinterColumns (simple .a.b.c JSONPaths),
//     otherwise Name and Age.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/operator/testserver/object_store.h"

namespace headroom::testserver {

nlohmann::json VersionInfo();
nlohmann::json ApiVersions(const std::string& server_address);
nlohmann::json ApiGroupList(const std::vector<ResourceInfo>& resources);
// nullopt when no kind of `group` is served.
std::optional<nlohmann::json> ApiGroup(const std::vector<ResourceInfo>& resources, const std::string& group);
// nullopt when the group/version serves no kind.
std::optional<nlohmann::json> ApiResourceList(const std::vector<ResourceInfo>& resources, const std::string& group,
                                              const std::string& version);

// OpenAPI v3 discovery: the root (/openapi/v3) lists a document per group/version; each
// document (/openapi/v3/api/v1, /openapi/v3/apis/<group>/<version>) has the object paths
// with the x-kubernetes-group-version-kind of each operation and its query parameters
// (fieldValidation among them: how kubectl learns that the server validates fields).
// No schemas: a client that needs one for a kind finds none.
nlohmann::json OpenApiV3Root(const std::vector<ResourceInfo>& resources);
std::optional<nlohmann::json> OpenApiV3Document(const std::vector<ResourceInfo>& resources, const std::string& group,
                                                const std::string& version);

// A custom resource's fields checked against its CRD's openAPIV3Schema for `version`, as
// a real server decodes one: fields the schema does not declare are pruned (metadata is
// ObjectMeta's, not the schema's; x-kubernetes-preserve-unknown-fields keeps a subtree).
// Returns the paths pruned ("spec.foo"); with fieldValidation=Strict the caller refuses the
// request when there is one. `object` may be a whole object or a merge patch of one.
std::vector<std::string> PruneUnknownFields(nlohmann::json& object, const nlohmann::json& crd,
                                            const std::string& version);

// True when an Accept header asks for the Table form.
bool WantsTable(const std::string& accept);
// `objects`: a list's items, or the one object of a get. `crd`: CrdOf(r) (may be null).
nlohmann::json ToTable(const ResourceInfo& r, const std::vector<nlohmann::json>& objects, const nlohmann::json& crd,
                       const std::string& resource_version);

}  // namespace headroom::testserver
