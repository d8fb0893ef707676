package deploy

// The CRD and core/spec must not drift: this test holds the CRD's schema to the same
// cases as the C++ validator (tests/core/testdata/specs and configs/).

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

func loadCRD(t *testing.T) map[string]interface{} {
	t.Helper()
	crd, err := DecodeYAMLFile(SourcePath("crds", "headroom.dev_trainingjobs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

// crdVersion returns the v1alpha1 entry of spec.versions.
func crdVersion(t *testing.T, crd map[string]interface{}) map[string]interface{} {
	t.Helper()
	versions, _ := dig(crd, "spec", "versions").([]interface{})
	for _, v := range versions {
		if m, _ := v.(map[string]interface{}); m["name"] == "v1alpha1" {
			return m
		}
	}
	t.Fatal("CRD has no v1alpha1 version")
	return nil
}

func crdSchema(t *testing.T) Schema {
	t.Helper()
	v := crdVersion(t, loadCRD(t))
	s, ok := dig(v, "schema", "openAPIV3Schema").(map[string]interface{})
	if !ok {
		t.Fatal("CRD has no openAPIV3Schema")
	}
	return Schema(s)
}

// dig walks nested maps by key; nil when any step is missing.
func dig(v interface{}, keys ...string) interface{} {
	for _, k := range keys {
		m, ok := v.(map[string]interface{})
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func TestCRDNamesSubresourcesAndColumns(t *testing.T) {
	crd := loadCRD(t)
	if crd["apiVersion"] != "apiextensions.k8s.io/v1" || crd["kind"] != "CustomResourceDefinition" {
		t.Errorf("not an apiextensions.k8s.io/v1 CustomResourceDefinition: %v %v", crd["apiVersion"], crd["kind"])
	}
	if got := dig(crd, "metadata", "name"); got != "trainingjobs.headroom.dev" {
		t.Errorf("metadata.name %v", got)
	}
	names := dig(crd, "spec", "names").(map[string]interface{})
	if names["kind"] != "TrainingJob" || names["plural"] != "trainingjobs" {
		t.Errorf("names %v", names)
	}
	if sn, _ := names["shortNames"].([]interface{}); len(sn) != 1 || sn[0] != "tj" {
		t.Errorf("shortNames %v, want [tj]", names["shortNames"])
	}
	v := crdVersion(t, crd)
	if v["served"] != true || v["storage"] != true {
		t.Error("v1alpha1 must be served and stored")
	}
	if dig(v, "subresources", "status") == nil {
		t.Error("no status subresource")
	}
	if dig(v, "subresources", "scale", "specReplicasPath") != ".spec.workers" ||
		dig(v, "subresources", "scale", "statusReplicasPath") != ".status.workers" {
		t.Errorf("scale subresource %v", dig(v, "subresources", "scale"))
	}
	schema := crdSchema(t)
	var cols []string
	for _, c := range v["additionalPrinterColumns"].([]interface{}) {
		col := c.(map[string]interface{})
		cols = append(cols, col["name"].(string))
		path := col["jsonPath"].(string)
		if strings.HasPrefix(path, ".metadata.") {
			continue
		}
		if schemaAt(schema, strings.Split(strings.TrimPrefix(path, "."), ".")) == nil {
			t.Errorf("printer column %s points at %s, which the schema does not declare", col["name"], path)
		}
	}
	if got := strings.Join(cols, ","); got != "Phase,Step,Workers,Mem%,Restarts,Age" {
		t.Errorf("printer columns %s", got)
	}
	for _, p := range []string{".spec.workers", ".status.workers", ".status.selector"} {
		if schemaAt(schema, strings.Split(strings.TrimPrefix(p, "."), ".")) == nil {
			t.Errorf("scale path %s is not in the schema", p)
		}
	}
}

// schemaAt follows property names down the schema; nil when one is not declared.
func schemaAt(s Schema, path []string) Schema {
	for _, name := range path {
		next, ok := s.props()[name]
		if !ok {
			return nil
		}
		s = next
	}
	return s
}

// Structural, described (kubectl explain), only keywords the validator implements, and
// every CEL rule compiles and only names declared fields (what the API server's type
// check refuses at CRD creation).
func TestCRDSchemaIsStructuralDescribedAndRulesTypeCheck(t *testing.T) {
	schema := crdSchema(t)
	for _, problem := range CheckSupported(schema, "") {
		t.Error(problem)
	}
	var walk func(s Schema, path []string)
	walk = func(s Schema, path []string) {
		for _, r := range s.rules() {
			prog, err := CompileCel(r.Rule)
			if err != nil {
				continue // reported by CheckSupported
			}
			for _, fields := range prog.SelfFieldPaths() {
				if len(path) == 0 && fields[0] == "metadata" {
					if len(fields) != 2 || (fields[1] != "name" && fields[1] != "generateName") {
						t.Errorf("root rule %q: only metadata.name and metadata.generateName are visible to CEL", r.Rule)
					}
					continue
				}
				if schemaAt(s, fields) == nil {
					t.Errorf("%s: rule %q names self.%s, which the schema does not declare", strings.Join(path, "."), r.Rule, strings.Join(fields, "."))
				}
			}
			if r.Message == "" {
				t.Errorf("%s: rule %q has no message", strings.Join(path, "."), r.Rule)
			}
			if r.FieldPath != "" {
				rel := strings.Split(strings.TrimPrefix(r.FieldPath, "."), ".")
				if !(len(path) == 0 && rel[0] == "metadata") && schemaAt(s, rel) == nil {
					t.Errorf("%s: fieldPath %s is not in the schema", strings.Join(path, "."), r.FieldPath)
				}
			}
		}
		for name, p := range s.props() {
			walk(p, append(append([]string{}, path...), name))
		}
		if it := s.items(); it != nil {
			walk(it, path)
		}
	}
	walk(schema, nil)
}

// Every default must itself pass its schema, as the API server requires.
func TestCRDDefaultsAreValid(t *testing.T) {
	var walk func(s Schema, path string)
	walk = func(s Schema, path string) {
		if d, ok := s["default"]; ok {
			v := ApplyDefaults(s, deepCopy(d))
			for _, e := range validateStructure(s, v, path) {
				t.Errorf("default of %s is invalid: %s", path, e)
			}
		}
		for name, p := range s.props() {
			walk(p, joinPath(path, name))
		}
	}
	walk(crdSchema(t), "")
}

// validateDocument runs a decoded TrainingJob through defaulting and validation.
func validateDocument(schema Schema, doc map[string]interface{}) []FieldError {
	return Validate(schema, ApplyDefaults(schema, doc), "")
}

func TestCRDAcceptsEveryValidSpec(t *testing.T) {
	schema := crdSchema(t)
	files, _ := filepath.Glob(SourcePath("configs", "*.yaml"))
	valid, _ := filepath.Glob(SourcePath("tests", "core", "testdata", "specs", "valid", "*.yaml"))
	files = append(files, valid...)
	if len(files) < 3 {
		t.Fatalf("found only %d example specs; configs/*.yaml should hold at least 3", len(files))
	}
	for _, f := range files {
		doc, err := DecodeYAMLFile(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if doc["kind"] != "TrainingJob" {
			continue
		}
		for _, e := range validateDocument(schema, doc) {
			t.Errorf("%s: rejected by the CRD schema: %s", rel(f), e)
		}
	}
	if len(valid) == 0 {
		t.Log("tests/core/testdata/specs/valid is empty: only configs/*.yaml were checked")
	}
}

// A corpus file whose rule no CRD schema can express. Each one is checked to really be
// accepted by the schema (or to be unparsable YAML), so a stale entry fails the test
// instead of hiding a rule the CRD gained.
type schemaBlindSpot struct {
	reason  string
	notYAML bool // malformed YAML: kubectl fails to parse it before any schema runs
}

// corpusBlindSpots lists individual corpus files by name, with the reason.
var corpusBlindSpots = map[string]schemaBlindSpot{}

// blindSpotFor classifies a corpus case by what it breaks: things the API server
// handles before or apart from a CRD's schema.
func blindSpotFor(c corpusCase, parseErr error) (schemaBlindSpot, bool) {
	if spot, ok := corpusBlindSpots[filepath.Base(c.file)]; ok {
		return spot, true
	}
	if parseErr != nil {
		return schemaBlindSpot{reason: "not one well-formed YAML mapping (malformed, empty, a list, several documents, duplicate keys): the parser decides, before any schema runs", notYAML: true}, true
	}
	if len(c.expected) == 0 {
		return schemaBlindSpot{}, false
	}
	for _, p := range c.expected {
		switch {
		case p == "apiVersion" || p == "kind":
			// apiVersion/kind select the resource: another value is another (or no) type.
		case strings.HasPrefix(p, "metadata.") && p != "metadata.name":
			// namespace, labels, annotations, generation: ObjectMeta, which the API server
			// validates itself for every object; a CRD schema may not constrain it.
		default:
			return schemaBlindSpot{}, false
		}
	}
	return schemaBlindSpot{reason: "apiVersion/kind routing or ObjectMeta (namespace, labels, annotations), which the API server checks itself, outside any CRD schema"}, true
}

type corpusCase struct {
	file     string
	expected []string // `# expect: <path>` lines
	rules    []string // `# rule: ...` lines
}

func readCorpusCase(t *testing.T, path string) corpusCase {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := corpusCase{file: path}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "#") {
			continue
		}
		body := strings.TrimSpace(strings.TrimPrefix(line, "#"))
		switch {
		case strings.HasPrefix(body, "expect:"):
			p := strings.TrimSpace(strings.TrimPrefix(body, "expect:"))
			if i := strings.Index(p, ": "); i >= 0 {
				p = p[:i]
			}
			if fields := strings.Fields(p); len(fields) > 0 {
				c.expected = append(c.expected, fields[0])
			} else {
				c.expected = append(c.expected, "")
			}
		case strings.HasPrefix(body, "rule:"):
			c.rules = append(c.rules, strings.TrimSpace(strings.TrimPrefix(body, "rule:")))
		}
	}
	return c
}

var indexRE = regexp.MustCompile(`\[[0-9]+\]`)

// pathsMatch: equal, equal without list indices, or one nested in the other.
func pathsMatch(a, b string) bool {
	if a == b {
		return true
	}
	a, b = indexRE.ReplaceAllString(a, ""), indexRE.ReplaceAllString(b, "")
	if a == b {
		return true
	}
	nested := func(outer, inner string) bool {
		return outer != "" && strings.HasPrefix(inner, outer) && (inner[len(outer)] == '.' || inner[len(outer)] == '[')
	}
	return nested(a, b) || nested(b, a)
}

func rel(path string) string {
	if r, err := filepath.Rel(SourceDir(), path); err == nil {
		return r
	}
	return path
}

func TestCRDRejectsTheInvalidCorpus(t *testing.T) {
	schema := crdSchema(t)
	files, _ := filepath.Glob(SourcePath("tests", "core", "testdata", "specs", "invalid", "*.yaml"))
	if len(files) == 0 {
		t.Skip("SKIP: no malformed-spec corpus in tests/core/testdata/specs/invalid yet")
	}
	sort.Strings(files)
	rejected, blind := 0, 0
	for _, f := range files {
		c := readCorpusCase(t, f)
		text, _ := os.ReadFile(f)
		docs, parseErr := DecodeYAMLDocuments(text)
		if parseErr == nil && len(docs) != 1 {
			parseErr = fmt.Errorf("%d documents, want 1", len(docs))
		}
		spot, listed := blindSpotFor(c, parseErr)
		if listed && spot.notYAML {
			if parseErr == nil {
				t.Errorf("%s: listed as malformed YAML (%s) but it parses", rel(f), spot.reason)
			}
			t.Logf("blind spot %s (%v): %s", filepath.Base(f), c.expected, spot.reason)
			blind++
			continue
		}
		errs := validateDocument(schema, docs[0])
		if listed {
			if len(errs) > 0 {
				t.Errorf("%s: listed as a schema blind spot (%s) but the schema rejects it: %v; remove the entry", rel(f), spot.reason, errs)
			}
			t.Logf("blind spot %s (%v): %s", filepath.Base(f), c.expected, spot.reason)
			blind++
			continue
		}
		if len(errs) == 0 {
			t.Errorf("%s: the C++ validator rejects it at %v (rule: %s) but the CRD schema accepts it", rel(f), c.expected, strings.Join(c.rules, "; "))
			continue
		}
		matched := false
		for _, want := range c.expected {
			for _, e := range errs {
				if pathsMatch(want, e.Path) {
					matched = true
				}
			}
		}
		if !matched && len(c.expected) > 0 {
			t.Errorf("%s: the C++ validator names %v but the schema rejects it at other paths: %v", rel(f), c.expected, errs)
			continue
		}
		rejected++
	}
	t.Logf("%d corpus files rejected by the schema at the C++ validator's path, %d schema blind spots", rejected, blind)
}

// Unknown fields are rejected (strict field validation), at their path.
func TestCRDRejectsUnknownFields(t *testing.T) {
	schema := crdSchema(t)
	doc := map[string]interface{}{
		"apiVersion": "headroom.dev/v1alpha1", "kind": "TrainingJob",
		"metadata": map[string]interface{}{"name": "x"},
		"spec":     map[string]interface{}{"grpo": map[string]interface{}{"groupsize": int64(4)}},
	}
	errs := validateDocument(schema, doc)
	if len(errs) != 1 || errs[0].Path != "spec.grpo.groupsize" {
		t.Errorf("got %v, want one error at spec.grpo.groupsize", errs)
	}
}

// A minimal job defaults to exactly the C++ defaults documented in training_job.h.
func TestCRDDefaultsMatchTrainingJobH(t *testing.T) {
	schema := crdSchema(t)
	doc := map[string]interface{}{"apiVersion": "headroom.dev/v1alpha1", "kind": "TrainingJob",
		"metadata": map[string]interface{}{"name": "x"}, "spec": map[string]interface{}{}}
	ApplyDefaults(schema, doc)
	if errs := Validate(schema, doc, ""); len(errs) > 0 {
		t.Fatalf("a minimal job is rejected: %v", errs)
	}
	header, err := os.ReadFile(SourcePath("core", "spec", "training_job.h"))
	if err != nil {
		t.Fatal(err)
	}
	// `  int prompts_per_step = 32;  // "promptsPerStep"` -> field default.
	member := regexp.MustCompile(`(?m)^\s+(int|int64_t|uint64_t|double|bool|std::string)\s+(\w+)\s*=\s*([^=;][^;]*);\s*(//\s*"(\w+)")?`)
	structField := map[string]string{"Resources": "resources", "ModelSpec": "model", "TaskSpec": "task",
		"DatasetSpec": "task.dataset", "PromptSpec": "task.prompt", "RewardSpec": "task.reward",
		"GrpoSpec": "grpo", "ShardingSpec": "sharding", "CheckpointSpec": "checkpoint",
		"MemoryGuardSpec": "memoryGuard", "DebugSpec": "debug", "TrainingJobSpec": ""}
	structRE := regexp.MustCompile(`(?m)^struct (\w+) \{`)
	text := string(header)
	locs := structRE.FindAllStringSubmatchIndex(text, -1)
	checked := 0
	for i, loc := range locs {
		name := text[loc[2]:loc[3]]
		prefix, ok := structField[name]
		if !ok {
			continue
		}
		end := len(text)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		for _, m := range member.FindAllStringSubmatch(text[loc[1]:end], -1) {
			yamlName := m[5]
			if yamlName == "" { // snake_case member, camelCase YAML name
				parts := strings.Split(m[2], "_")
				for i := 1; i < len(parts); i++ {
					parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
				}
				yamlName = strings.Join(parts, "")
			}
			path := []string{"spec"}
			if prefix != "" {
				path = append(path, strings.Split(prefix, ".")...)
			}
			path = append(path, yamlName)
			got := dig(doc, path...)
			want := strings.TrimSpace(m[3])
			if strings.HasSuffix(m[2], "_bytes") || strings.HasSuffix(m[2], "_millis") {
				continue // parsed forms of quantities, not YAML fields
			}
			checked++
			if !defaultEquals(got, want) {
				t.Errorf("spec.%s: CRD default %v, training_job.h default %s", strings.Join(path[1:], "."), got, want)
			}
		}
	}
	if checked < 30 {
		t.Errorf("compared only %d defaults with training_job.h; its layout changed?", checked)
	}
}

// defaultEquals compares a schema default with a C++ initializer text.
func defaultEquals(got interface{}, cpp string) bool {
	cpp = strings.TrimSuffix(strings.TrimSuffix(cpp, "LL << 30"), "LL")
	switch g := got.(type) {
	case nil:
		return cpp == "0" // 0 means "derived" (model dims, seed): no schema default
	case string:
		return strings.Trim(cpp, `"`) == g || (cpp == "0" && g == "0")
	case bool:
		return (cpp == "true") == g
	case int64: // also an integral double: 1.0 arrives as 1
		f, err := strconv.ParseFloat(cpp, 64)
		return err == nil && f == float64(g)
	case float64:
		f, err := strconv.ParseFloat(cpp, 64)
		return err == nil && f == g
	}
	return false
}

// The status the operator writes (operator/runtime/job_status.cc ToJson, plus
// observedGeneration) must fit the schema: the API server prunes undeclared fields
// and refuses wrongly typed ones, so a mismatch would lose status or fail every write.
func TestCRDStatusAcceptsWhatTheOperatorWrites(t *testing.T) {
	schema := crdSchema(t)
	status := map[string]interface{}{
		"phase": "Restarting", "generation": int64(3), "step": int64(120), "workers": int64(2),
		"restarts": int64(1), "reshards": int64(1), "oomKills": int64(0), "stepsLost": int64(0),
		"memory": map[string]interface{}{"hostBytes": int64(900 << 20), "hostLimitBytes": int64(1 << 30),
			"hostPercent": int64(87), "gpuBytes": int64(0), "gpuLimitBytes": int64(0),
			"growthBytesPerStep": 50331648.5, "forecastStepsToLimit": 2.4},
		"lastAction": map[string]interface{}{"type": "restart", "reason": "host forecast 1.02 GiB within 2 steps",
			"step": int64(118), "time": "2026-01-02T03:04:05Z"},
		"conditions": []interface{}{map[string]interface{}{"type": "MemoryPressure", "status": "True",
			"reason": "ForecastOverThreshold", "message": "restarting", "lastTransitionTime": "2026-01-02T03:04:05Z"}},
		"modelFetch": map[string]interface{}{"repo": "Qwen/Qwen2.5-0.5B-Instruct", "revision": "main",
			"file": "model.safetensors", "doneBytes": int64(1 << 20), "totalBytes": int64(988097824)},
		"message":            "",
		"observedGeneration": int64(4),
		"selector":           "headroom.dev/job-name=x",
	}
	statusSchema := schemaAt(schema, []string{"status"})
	for _, e := range Validate(statusSchema, status, "status") {
		t.Errorf("operator status rejected: %s", e)
	}
	// And a field the schema does not declare is caught (it would be pruned).
	status["restartz"] = int64(1)
	if errs := Validate(statusSchema, status, "status"); len(errs) != 1 || errs[0].Path != "status.restartz" {
		t.Errorf("an undeclared status field gives %v", errs)
	}
}
