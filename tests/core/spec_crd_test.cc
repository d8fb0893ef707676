// The committed CRD (crds/ and the chart's copy) is what core/spec's field table and
// overlay generate, byte for byte; and the generated schema says what the table says.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/spec/crd_generator.h"
#include "core/spec/document_tree.h"
#include "core/spec/training_job_fields.h"

namespace headroom::spec {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(SpecCrd, CommittedCopiesAreWhatTheTableGenerates) {
  const std::string generated = TrainingJobCrdYaml();
  for (const char* copy :
       {"crds/headroom.dev_trainingjobs.yaml", "charts/headroom/files/crds/headroom.dev_trainingjobs.yaml"}) {
    const std::string committed = ReadFile(fs::path(HEADROOM_SOURCE_DIR) / copy);
    EXPECT_TRUE(committed == generated)
        << copy << " differs from what core/spec's field table generates; run scripts/generate-crds.sh";
  }
}

// The generated text reads back (with the spec loader) to a schema whose spec fields are
// the table's rows, in order, each with its description.
const DocumentNode* At(const DocumentNode& n, std::initializer_list<const char*> keys) {
  const DocumentNode* at = &n;
  for (const char* k : keys) {
    if (at == nullptr) return nullptr;
    at = at->Find(k);
  }
  return at;
}

void ExpectRows(const DocumentNode& schema, const std::vector<FieldDef>& rows, const std::string& path) {
  const DocumentNode* props = schema.Find("properties");
  ASSERT_NE(props, nullptr) << path;
  ASSERT_EQ(props->members.size(), rows.size()) << path;
  for (size_t i = 0; i < rows.size(); ++i) {
    const DocumentMember& m = props->members[i];
    EXPECT_EQ(m.key, rows[i].name) << path;
    const DocumentNode* description = m.value.Find("description");
    ASSERT_NE(description, nullptr) << path << "." << m.key;
    EXPECT_EQ(description->text, rows[i].doc) << path << "." << m.key;
    if (rows[i].kind == FieldKind::kObject) ExpectRows(m.value, rows[i].fields, path + "." + m.key);
  }
}

TEST(SpecCrd, SpecSchemaHasEveryRowInTableOrder) {
  DocumentLoad load = LoadYamlDocument(TrainingJobCrdYaml());
  ASSERT_TRUE(load.usable && load.errors.empty());
  const DocumentNode* versions = At(load.root, {"spec", "versions"});
  ASSERT_NE(versions, nullptr);
  ASSERT_EQ(versions->items.size(), 1u);
  const DocumentNode* spec = At(versions->items[0], {"schema", "openAPIV3Schema", "properties", "spec"});
  ASSERT_NE(spec, nullptr);
  ExpectRows(*spec, SpecFields(), "spec");
}

// A row's default is its struct initialiser: change one and the CRD follows.
TEST(SpecCrd, DefaultsComeFromTheStructInitialisers) {
  DocumentLoad load = LoadYamlDocument(TrainingJobCrdYaml());
  ASSERT_TRUE(load.usable);
  const DocumentNode* grpo =
      At(load.root.Find("spec")->Find("versions")->items[0],
         {"schema", "openAPIV3Schema", "properties", "spec", "properties", "grpo", "properties"});
  ASSERT_NE(grpo, nullptr);
  EXPECT_EQ(At(*grpo, {"groupSize", "default"})->int_value, GrpoSpec{}.group_size);
  EXPECT_EQ(At(*grpo, {"learningRate", "default"})->float_value, GrpoSpec{}.learning_rate);
  EXPECT_EQ(At(*grpo, {"lossAggregation", "default"})->text, GrpoSpec{}.loss_aggregation);
}

}  // namespace
}  // namespace headroom::spec
