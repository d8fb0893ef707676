package deploy

// One rule at a time: a valid job (configs/reverse-tiny.yaml) with one change, which the
// CRD must reject at the path core/spec's validator names, or accept. When the headroom
// CLI is built, `headroom validate` judges the same document and must agree: the
// schema and the C++ validator are held to each other, not just to this table.

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	yamlv2 "gopkg.in/yaml.v2"
)

type mutation struct {
	name    string
	changes map[string]interface{} // dotted path -> value (nil deletes)
	reject  string                 // path the error must be at; "" means accepted
}

var longName = strings.Repeat("a", 54) // with maxWorkers 2: a-...-worker-1 is 63 characters

var crdMutations = []mutation{
	{"base", nil, ""},
	{"groupSize 1", map[string]interface{}{"spec.grpo.groupSize": 1}, "spec.grpo.groupSize"},
	{"workers over maxWorkers", map[string]interface{}{"spec.workers": 4, "spec.grpo.promptsPerStep": 16}, "spec.workers"},
	{"minWorkers over workers", map[string]interface{}{"spec.minWorkers": 2}, "spec.minWorkers"},
	{"workers 0", map[string]interface{}{"spec.workers": 0}, "spec.workers"},
	{"prompts not divisible by updates", map[string]interface{}{"spec.grpo.promptsPerStep": 15, "spec.grpo.updatesPerStep": 2}, "spec.grpo.promptsPerStep"},
	{"mini-batch not divisible by workers", map[string]interface{}{"spec.workers": 2, "spec.grpo.promptsPerStep": 15}, "spec.workers"},
	{"divisible reshard", map[string]interface{}{"spec.workers": 2, "spec.grpo.promptsPerStep": 16, "spec.grpo.updatesPerStep": 2}, ""},
	{"offloadParams below stage 3", map[string]interface{}{"spec.sharding.offloadParams": true}, "spec.sharding.offloadParams"},
	{"offloadParams at stage 3", map[string]interface{}{"spec.sharding.offloadParams": true, "spec.sharding.stage": 3}, ""},
	{"stage 4", map[string]interface{}{"spec.sharding.stage": 4}, "spec.sharding.stage"},
	{"init checkpoint without a path", map[string]interface{}{"spec.model.init": "checkpoint"}, "spec.model.initCheckpoint"},
	{"init checkpoint with a path", map[string]interface{}{"spec.model.init": "checkpoint", "spec.model.initCheckpoint": "/ckpt/step-000100"}, ""},
	{"initCheckpoint with init random", map[string]interface{}{"spec.model.initCheckpoint": "/ckpt"}, "spec.model.initCheckpoint"},
	{"explicit dims without heads", map[string]interface{}{"spec.model.preset": "", "spec.model.layers": 2, "spec.model.hidden": 64}, "spec.model.heads"},
	{"explicit dims", map[string]interface{}{"spec.model.preset": "", "spec.model.layers": 2, "spec.model.hidden": 64, "spec.model.heads": 8}, ""},
	{"hidden not divisible by the preset's heads", map[string]interface{}{"spec.model.hidden": 66}, "spec.model.heads"},
	{"preset unknown", map[string]interface{}{"spec.model.preset": "huge"}, "spec.model.preset"},
	{"maxSeqLen too short", map[string]interface{}{"spec.model.maxSeqLen": 10}, "spec.model.maxSeqLen"},
	{"maxSeqLen enough", map[string]interface{}{"spec.model.maxSeqLen": 14}, ""},
	{"prompt too short for the task", map[string]interface{}{"spec.grpo.maxPromptLength": 4}, "spec.grpo.maxPromptLength"},
	{"prompt just long enough", map[string]interface{}{"spec.grpo.maxPromptLength": 5}, ""},
	{"response too short for addition", map[string]interface{}{"spec.task.name": "addition", "spec.grpo.maxPromptLength": 9, "spec.grpo.maxResponseLength": 4}, "spec.grpo.maxResponseLength"},
	{"addition fits", map[string]interface{}{"spec.task.name": "addition", "spec.grpo.maxPromptLength": 9, "spec.grpo.maxResponseLength": 5}, ""},
	{"digits 13", map[string]interface{}{"spec.task.digits": 13}, "spec.task.digits"},
	{"task unknown", map[string]interface{}{"spec.task.name": "multiply"}, "spec.task.name"},
	{"memory 0", map[string]interface{}{"spec.resources.memory": "0"}, "spec.resources.memory"},
	{"memory negative", map[string]interface{}{"spec.resources.memory": "-1Gi"}, "spec.resources.memory"},
	{"memory bad suffix", map[string]interface{}{"spec.resources.memory": "4GB"}, "spec.resources.memory"},
	{"memory decimal", map[string]interface{}{"spec.resources.memory": "1.5Gi"}, ""},
	{"memory as an integer", map[string]interface{}{"spec.resources.memory": 2147483648}, ""},
	{"cpu millis", map[string]interface{}{"spec.resources.cpu": "500m"}, ""},
	{"cpu 0", map[string]interface{}{"spec.resources.cpu": 0}, "spec.resources.cpu"},
	{"gpus negative", map[string]interface{}{"spec.resources.gpus": -1}, "spec.resources.gpus"},
	{"leak negative", map[string]interface{}{"spec.debug.hostLeakBytesPerStep": "-1Mi"}, "spec.debug.hostLeakBytesPerStep"},
	{"leak zero", map[string]interface{}{"spec.debug.hostLeakBytesPerStep": "0"}, ""},
	{"duplicate action", map[string]interface{}{"spec.memoryGuard.actions": []interface{}{"restart", "reshard", "restart"}}, "spec.memoryGuard.actions[2]"},
	{"unknown action", map[string]interface{}{"spec.memoryGuard.actions": []interface{}{"explode"}}, "spec.memoryGuard.actions[0]"},
	{"host threshold 0", map[string]interface{}{"spec.memoryGuard.hostThreshold": 0}, "spec.memoryGuard.hostThreshold"},
	{"host threshold 1", map[string]interface{}{"spec.memoryGuard.hostThreshold": 1}, ""},
	{"gpu threshold over 1", map[string]interface{}{"spec.memoryGuard.gpuThreshold": 1.5}, "spec.memoryGuard.gpuThreshold"},
	{"horizon 0", map[string]interface{}{"spec.memoryGuard.horizonSteps": 0}, "spec.memoryGuard.horizonSteps"},
	{"maxRestarts negative", map[string]interface{}{"spec.memoryGuard.maxRestarts": -1}, "spec.memoryGuard.maxRestarts"},
	{"clipLow 1", map[string]interface{}{"spec.grpo.clipLow": 1}, "spec.grpo.clipLow"},
	{"learningRate 0", map[string]interface{}{"spec.grpo.learningRate": 0}, "spec.grpo.learningRate"},
	{"klCoef negative", map[string]interface{}{"spec.grpo.klCoef": -0.1}, "spec.grpo.klCoef"},
	{"temperature 0", map[string]interface{}{"spec.grpo.temperature": 0}, "spec.grpo.temperature"},
	{"lossAggregation unknown", map[string]interface{}{"spec.grpo.lossAggregation": "sum"}, "spec.grpo.lossAggregation"},
	{"everySteps 0", map[string]interface{}{"spec.checkpoint.everySteps": 0}, "spec.checkpoint.everySteps"},
	{"keep 0", map[string]interface{}{"spec.checkpoint.keep": 0}, "spec.checkpoint.keep"},
	{"volume not a PVC name", map[string]interface{}{"spec.checkpoint.volume": "Bad_Name"}, "spec.checkpoint.volume"},
	{"volume a PVC name", map[string]interface{}{"spec.checkpoint.volume": "headroom-ckpt"}, ""},
	{"image with a space", map[string]interface{}{"spec.image": "a b"}, "spec.image"},
	{"image empty", map[string]interface{}{"spec.image": ""}, "spec.image"},
	{"name starts with a digit", map[string]interface{}{"metadata.name": "1job"}, "metadata.name"},
	{"name upper case", map[string]interface{}{"metadata.name": "Job"}, "metadata.name"},
	{"name at the length limit", map[string]interface{}{"metadata.name": longName}, ""},
	{"name one over the limit", map[string]interface{}{"metadata.name": longName + "a"}, "metadata.name"},
	{"name over the limit for 10 workers", map[string]interface{}{"metadata.name": longName, "spec.maxWorkers": 11}, "metadata.name"},
	{"workers as a string", map[string]interface{}{"spec.workers": "2"}, "spec.workers"},
	{"suspend as a string", map[string]interface{}{"spec.suspend": "yes"}, "spec.suspend"},
	{"unknown field", map[string]interface{}{"spec.grpo.groupsize": 4}, "spec.grpo.groupsize"},
	{"integral double for an integer", map[string]interface{}{"spec.grpo.steps": 100.0}, ""},
}

// setPath sets a dotted path in nested maps, creating maps on the way.
func setPath(doc map[string]interface{}, path string, v interface{}) {
	parts := strings.Split(path, ".")
	m := doc
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]interface{})
		if !ok {
			next = map[string]interface{}{}
			m[p] = next
		}
		m = next
	}
	if v == nil {
		delete(m, parts[len(parts)-1])
	} else {
		m[parts[len(parts)-1]] = jsonLike(v)
	}
}

func headroomCLI() string {
	bin := os.Getenv("HEADROOM_BINARY_DIR")
	if bin == "" {
		bin = SourcePath("build")
	}
	p := filepath.Join(bin, "bin", "headroom")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// cppValidate runs `headroom validate` on doc: the error paths, or nil when valid.
func cppValidate(t *testing.T, cli string, doc map[string]interface{}) (paths []string, valid bool) {
	t.Helper()
	text, err := yamlv2.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "job.yaml")
	os.WriteFile(path, text, 0o644)
	out, err := exec.Command(cli, "validate", path).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil, true
	case errors.As(err, &exit) && exit.ExitCode() == 2:
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			// "path: message", possibly prefixed by "file:line:col: ".
			line = strings.TrimPrefix(line, path+":")
			if i := strings.Index(line, ": "); i >= 0 {
				p := strings.TrimSpace(line[:i])
				if j := strings.LastIndex(p, " "); j >= 0 {
					p = p[j+1:]
				}
				paths = append(paths, p)
			}
		}
		return paths, false
	default:
		t.Fatalf("headroom validate: %v\n%s", err, out)
	}
	return nil, false
}

func TestCRDMutationsAgreeWithCoreSpec(t *testing.T) {
	schema := crdSchema(t)
	base, err := DecodeYAMLFile(SourcePath("configs", "reverse-tiny.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cli := headroomCLI()
	if cli == "" {
		t.Log("build/bin/headroom not built: checking the schema against this table only, not against `headroom validate`")
	}
	for _, m := range crdMutations {
		doc := deepCopy(base).(map[string]interface{})
		for p, v := range m.changes {
			setPath(doc, p, v)
		}
		var cppPaths []string
		cppValid := true
		if cli != "" {
			cppPaths, cppValid = cppValidate(t, cli, deepCopy(doc).(map[string]interface{}))
		}
		errs := validateDocument(schema, doc)
		if m.reject == "" {
			if len(errs) > 0 {
				t.Errorf("%s: the CRD rejects a valid job: %v", m.name, errs)
			}
			if !cppValid {
				t.Errorf("%s: headroom validate rejects it at %v; table or core/spec is wrong", m.name, cppPaths)
			}
			continue
		}
		found := false
		for _, e := range errs {
			if e.Path == m.reject {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: want a CRD error at %s, got %v", m.name, m.reject, errs)
		}
		if cli != "" {
			agree := false
			for _, p := range cppPaths {
				if pathsMatch(p, m.reject) {
					agree = true
				}
			}
			if cppValid || !agree {
				t.Errorf("%s: headroom validate says valid=%v at %v, the CRD rejects at %s", m.name, cppValid, cppPaths, m.reject)
			}
		}
	}
}
