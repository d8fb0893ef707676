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
	"regexp"
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
	{"token budget under one sequence", map[string]interface{}{"spec.grpo.maxTokensPerMicroBatch": 13}, "spec.grpo.maxTokensPerMicroBatch"},
	{"token budget of one sequence", map[string]interface{}{"spec.grpo.maxTokensPerMicroBatch": 14}, ""},
	{"token budget negative", map[string]interface{}{"spec.grpo.maxTokensPerMicroBatch": -1}, "spec.grpo.maxTokensPerMicroBatch"},
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

// obj and list keep the template mutations below readable.
type obj = map[string]interface{}
type list = []interface{}

// worker is spec.template with one worker container holding `fields`.
func worker(fields obj) map[string]interface{} {
	return map[string]interface{}{"spec.template.spec.containers": list{fields}}
}

func init() {
	crdMutations = append(crdMutations, []mutation{
		{"template for a GPU pool", map[string]interface{}{
			"spec.template.metadata":                obj{"labels": obj{"team": "rl"}, "annotations": obj{"example.com/owner": "me"}},
			"spec.template.spec.nodeSelector":       obj{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
			"spec.template.spec.affinity":           obj{"nodeAffinity": obj{"requiredDuringSchedulingIgnoredDuringExecution": obj{"nodeSelectorTerms": list{obj{"matchExpressions": list{obj{"key": "pool", "operator": "In", "values": list{"a"}}}}}}}},
			"spec.template.spec.tolerations":        list{obj{"key": "gpu-type", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}},
			"spec.template.spec.priorityClassName":  "training-high",
			"spec.template.spec.schedulerName":      "volcano",
			"spec.template.spec.runtimeClassName":   "nvidia",
			"spec.template.spec.serviceAccountName": "trainer",
			"spec.template.spec.imagePullSecrets":   list{obj{"name": "registry"}},
			"spec.template.spec.securityContext":    obj{"runAsUser": 1000, "fsGroup": 1000},
			"spec.template.spec.volumes":            list{obj{"name": "model", "persistentVolumeClaim": obj{"claimName": "m", "readOnly": true}}},
			"spec.template.spec.containers": list{obj{"name": "worker",
				"env":          list{obj{"name": "HF_TOKEN", "valueFrom": obj{"secretKeyRef": obj{"name": "hf", "key": "token"}}}},
				"envFrom":      list{obj{"secretRef": obj{"name": "store"}}},
				"volumeMounts": list{obj{"name": "model", "mountPath": "/models", "readOnly": true}},
				"resources":    obj{"limits": obj{"rdma/hca": 1}, "requests": obj{"rdma/hca": "1"}},
				"securityContext": obj{"capabilities": obj{"add": list{"IPC_LOCK"}}}}},
		}, ""},
		{"template env MASTER_ADDR", worker(obj{"env": list{obj{"name": "A", "value": "a"}, obj{"name": "MASTER_ADDR", "value": "x"}}}), "spec.template.spec.containers[0].env[1].name"},
		{"template env value and valueFrom", worker(obj{"env": list{obj{"name": "A", "value": "a", "valueFrom": obj{}}}}), "spec.template.spec.containers[0].env[0]"},
		{"template command", worker(obj{"command": list{"sh"}}), "spec.template.spec.containers[0].command"},
		{"template second container", map[string]interface{}{"spec.template.spec.containers": list{obj{"name": "worker"}, obj{"name": "worker"}}}, "spec.template.spec.containers"},
		{"template container not the worker", worker(obj{"name": "sidecar"}), "spec.template.spec.containers[0].name"},
		{"template checkpoints volume", map[string]interface{}{"spec.template.spec.volumes": list{obj{"name": "checkpoints", "emptyDir": obj{}}}}, "spec.template.spec.volumes[0].name"},
		{"template volume without a source", map[string]interface{}{"spec.template.spec.volumes": list{obj{"name": "data"}}}, "spec.template.spec.volumes[0]"},
		{"template mount over checkpoints", map[string]interface{}{
			"spec.template.spec.volumes":    list{obj{"name": "data", "emptyDir": obj{}}},
			"spec.template.spec.containers": list{obj{"volumeMounts": list{obj{"name": "data", "mountPath": "/checkpoints/data"}}}},
		}, "spec.template.spec.containers[0].volumeMounts[0].mountPath"},
		{"template mount of the spec volume", worker(obj{"volumeMounts": list{obj{"name": "spec", "mountPath": "/x"}}}), "spec.template.spec.containers[0].volumeMounts[0].name"},
		{"template runAsNonRoot false", map[string]interface{}{"spec.template.spec.securityContext": obj{"runAsNonRoot": false}}, "spec.template.spec.securityContext.runAsNonRoot"},
		{"template runAsUser 0", map[string]interface{}{"spec.template.spec.securityContext": obj{"runAsUser": 0}}, "spec.template.spec.securityContext.runAsUser"},
		{"template privileged", worker(obj{"securityContext": obj{"privileged": true}}), "spec.template.spec.containers[0].securityContext.privileged"},
		{"template privilege escalation", worker(obj{"securityContext": obj{"allowPrivilegeEscalation": true}}), "spec.template.spec.containers[0].securityContext.allowPrivilegeEscalation"},
		{"template writable root", worker(obj{"securityContext": obj{"readOnlyRootFilesystem": false}}), "spec.template.spec.containers[0].securityContext.readOnlyRootFilesystem"},
		{"template capabilities drop", worker(obj{"securityContext": obj{"capabilities": obj{"drop": list{"ALL"}}}}), "spec.template.spec.containers[0].securityContext.capabilities.drop"},
		{"template memory limit", worker(obj{"resources": obj{"limits": obj{"memory": "8Gi"}}}), "spec.template.spec.containers[0].resources.limits"},
		{"template bad quantity", worker(obj{"resources": obj{"limits": obj{"rdma/hca": "1KB"}}}), "spec.template.spec.containers[0].resources.limits[rdma/hca]"},
		{"template operator label", map[string]interface{}{"spec.template.metadata": obj{"labels": obj{"headroom.dev/rank": "0"}}}, "spec.template.metadata.labels"},
		{"template scrape annotation", map[string]interface{}{"spec.template.metadata": obj{"annotations": obj{"prometheus.io/port": "1"}}}, "spec.template.metadata.annotations"},
		{"template toleration Exists with a value", map[string]interface{}{"spec.template.spec.tolerations": list{obj{"key": "k", "operator": "Exists", "value": "v"}}}, "spec.template.spec.tolerations[0].value"},
		{"template toleration without key", map[string]interface{}{"spec.template.spec.tolerations": list{obj{"operator": "Equal", "value": "v"}}}, "spec.template.spec.tolerations[0].operator"},
		{"template envFrom without a source", worker(obj{"envFrom": list{obj{"prefix": "X_"}}}), "spec.template.spec.containers[0].envFrom[0]"},
		{"template priority class not a name", map[string]interface{}{"spec.template.spec.priorityClassName": "High_Priority"}, "spec.template.spec.priorityClassName"},
		{"template unknown pod field", map[string]interface{}{"spec.template.spec.hostNetwork": true}, "spec.template.spec.hostNetwork"},
		{"template unknown affinity", map[string]interface{}{"spec.template.spec.affinity": obj{"nodeAfinity": obj{}}}, "spec.template.spec.affinity.nodeAfinity"},
	}...)
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

var envConstantRE = regexp.MustCompile(`inline constexpr const char\* (k\w+Env) = "([^"]+)";`)
var ownedEnvBodyRE = regexp.MustCompile(`(?s)std::vector<std::string> OperatorOwnedEnvNames\(\) \{(.*?)\n\}`)
var constantRefRE = regexp.MustCompile(`\b(k\w+Env)\b`)

// supervisorEnv reads every environment name the C++ side defines (core/protocol and the
// pod's own in core/spec/pod_template.h) and which of them OperatorOwnedEnvNames returns.
func supervisorEnv(t *testing.T) (all map[string]string, owned map[string]bool) {
	t.Helper()
	all = map[string]string{}
	for _, f := range []string{SourcePath("core", "protocol", "environment.h"), SourcePath("core", "spec", "pod_template.h")} {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range envConstantRE.FindAllStringSubmatch(string(text), -1) {
			all[m[1]] = m[2]
		}
	}
	src, err := os.ReadFile(SourcePath("core", "spec", "pod_template.cc"))
	if err != nil {
		t.Fatal(err)
	}
	body := ownedEnvBodyRE.FindStringSubmatch(string(src))
	if body == nil {
		t.Fatal("core/spec/pod_template.cc: OperatorOwnedEnvNames() not found")
	}
	owned = map[string]bool{}
	for _, m := range constantRefRE.FindAllStringSubmatch(body[1], -1) {
		name, ok := all[m[1]]
		if !ok {
			t.Fatalf("OperatorOwnedEnvNames names %s, which no header defines", m[1])
		}
		owned[name] = true
	}
	return all, owned
}

// The CRD refuses exactly the environment names core/spec refuses in a template: every
// name the C++ side defines is tried, owned or not (the tuning variables stay the user's).
func TestCRDTemplateEnvNamesAgreeWithCoreSpec(t *testing.T) {
	schema := crdSchema(t)
	base, err := DecodeYAMLFile(SourcePath("configs", "reverse-tiny.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	all, owned := supervisorEnv(t)
	if len(owned) < 10 || len(all) <= len(owned) {
		t.Fatalf("read %d names, %d owned: the header parsing is broken", len(all), len(owned))
	}
	cli := headroomCLI()
	for _, name := range all {
		doc := deepCopy(base).(map[string]interface{})
		setPath(doc, "spec.template.spec.containers", list{obj{"env": list{obj{"name": name, "value": "1"}}}})
		rejected := false
		for _, e := range validateDocument(schema, doc) {
			if e.Path == "spec.template.spec.containers[0].env[0].name" {
				rejected = true
			} else {
				t.Errorf("%s: unexpected CRD error %v", name, e)
			}
		}
		if rejected != owned[name] {
			t.Errorf("env %s: the CRD rejects=%v, core/spec's OperatorOwnedEnvNames has it=%v", name, rejected, owned[name])
		}
		if cli != "" {
			if _, valid := cppValidate(t, cli, doc); valid == owned[name] {
				t.Errorf("env %s: headroom validate says valid=%v, owned=%v", name, valid, owned[name])
			}
		}
	}
}
