package deploy

// charts/headroom rendered with helm's template semantics (helm.go) under several value
// sets, and every rendered manifest checked.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const (
	releaseName      = "hr"
	releaseNamespace = "headroom-system"
)

// The API version each kind the chart may render must have.
var chartKinds = map[string]string{
	"CustomResourceDefinition": "apiextensions.k8s.io/v1",
	"ServiceAccount":           "v1",
	"Service":                  "v1",
	"ConfigMap":                "v1",
	"Deployment":               "apps/v1",
	"ClusterRole":              "rbac.authorization.k8s.io/v1",
	"ClusterRoleBinding":       "rbac.authorization.k8s.io/v1",
	"Role":                     "rbac.authorization.k8s.io/v1",
	"RoleBinding":              "rbac.authorization.k8s.io/v1",
	"ServiceMonitor":           "monitoring.coreos.com/v1",
	"PodMonitor":               "monitoring.coreos.com/v1",
	"PrometheusRule":           "monitoring.coreos.com/v1",
}

var clusterScoped = map[string]bool{"CustomResourceDefinition": true, "ClusterRole": true, "ClusterRoleBinding": true}

// operatorPermissions is exactly what headroom-operator calls (the list in
// templates/rbac.yaml): group/resource -> verbs.
var operatorPermissions = map[string][]string{
	"headroom.dev/trainingjobs":            {"delete", "get", "list", "watch"},
	"headroom.dev/trainingjobs/status":     {"patch"},
	"headroom.dev/trainingjobs/finalizers": {"update"},
	"/pods":                                {"get", "list", "watch", "create", "delete"},
	"/services":                            {"create"},
	"/configmaps":                          {"get", "create", "update"},
	"/events":                              {"create"},
	"scheduling.volcano.sh/podgroups":      {"create", "delete", "list"},
	"scheduling.x-k8s.io/podgroups":        {"create", "delete", "list"},
}

var leasePermissions = map[string][]string{"coordination.k8s.io/leases": {"get", "create", "update"}}

type rendering struct {
	docs  []map[string]interface{}
	notes string
}

func renderChart(t *testing.T, overrides map[string]interface{}) rendering {
	t.Helper()
	chart, err := LoadChart(SourcePath("charts", "headroom"))
	if err != nil {
		t.Fatal(err)
	}
	out, notes, err := chart.Render(Release{Name: releaseName, Namespace: releaseNamespace, Service: "Helm", IsInstall: true, Revision: 1},
		overrides, "v1.29.0", []string{"monitoring.coreos.com/v1"})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	var r rendering
	r.notes = notes
	for _, f := range out {
		docs, err := DecodeYAMLDocuments([]byte(f.Text))
		if err != nil {
			t.Fatalf("%s does not render to YAML: %v\n%s", f.Template, err, f.Text)
		}
		r.docs = append(r.docs, docs...)
	}
	checkManifests(t, r.docs)
	return r
}

func (r rendering) all(kind string) []map[string]interface{} {
	var out []map[string]interface{}
	for _, d := range r.docs {
		if d["kind"] == kind {
			out = append(out, d)
		}
	}
	return out
}

func (r rendering) one(t *testing.T, kind string) map[string]interface{} {
	t.Helper()
	all := r.all(kind)
	if len(all) != 1 {
		t.Fatalf("%d %s objects rendered, want 1", len(all), kind)
	}
	return all[0]
}

var dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// checkManifests: the checks every rendering must pass.
func checkManifests(t *testing.T, docs []map[string]interface{}) {
	t.Helper()
	seen := map[string]bool{}
	for _, d := range docs {
		kind, _ := d["kind"].(string)
		name, _ := dig(d, "metadata", "name").(string)
		ns, _ := dig(d, "metadata", "namespace").(string)
		id := fmt.Sprintf("%s %s/%s", kind, ns, name)
		want, known := chartKinds[kind]
		if !known {
			t.Errorf("%s: unexpected kind", id)
			continue
		}
		if d["apiVersion"] != want {
			t.Errorf("%s: apiVersion %v, want %s", id, d["apiVersion"], want)
		}
		if name == "" || len(name) > 253 || !dns1123Subdomain.MatchString(name) {
			t.Errorf("%s: metadata.name is not a DNS-1123 subdomain", id)
		}
		if kind == "Service" && len(name) > 63 {
			t.Errorf("%s: Service names must be at most 63 characters", id)
		}
		if clusterScoped[kind] != (ns == "") {
			t.Errorf("%s: namespace set on a cluster-scoped object, or missing on a namespaced one", id)
		}
		if seen[id] {
			t.Errorf("%s rendered twice", id)
		}
		seen[id] = true
		labels, _ := dig(d, "metadata", "labels").(map[string]interface{})
		for _, l := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart"} {
			if labels[l] == nil || labels[l] == "" {
				t.Errorf("%s: no %s label", id, l)
			}
		}
		if labels["app.kubernetes.io/instance"] != releaseName || labels["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("%s: instance/managed-by labels %v", id, labels)
		}
		for k, v := range labels {
			if s, ok := v.(string); !ok || len(s) > 63 {
				t.Errorf("%s: label %s=%v is not a string of at most 63 characters", id, k, v)
			}
		}
	}
	checkReferences(t, docs)
}

// checkReferences: bindings name roles and service accounts that exist, the Deployment
// runs as the rendered ServiceAccount, Services select the Deployment's pods on a port it
// declares.
func checkReferences(t *testing.T, docs []map[string]interface{}) {
	t.Helper()
	byKind := map[string]map[string]map[string]interface{}{}
	for _, d := range docs {
		k := d["kind"].(string)
		if byKind[k] == nil {
			byKind[k] = map[string]map[string]interface{}{}
		}
		byKind[k][dig(d, "metadata", "name").(string)] = d
	}
	for _, kind := range []string{"RoleBinding", "ClusterRoleBinding"} {
		for name, b := range byKind[kind] {
			ref := b["roleRef"].(map[string]interface{})
			role := byKind[ref["kind"].(string)][ref["name"].(string)]
			if role == nil {
				t.Errorf("%s %s: roleRef %v is not rendered", kind, name, ref)
			} else if kind == "RoleBinding" && ref["kind"] == "Role" && dig(role, "metadata", "namespace") != dig(b, "metadata", "namespace") {
				t.Errorf("RoleBinding %s and its Role are in different namespaces", name)
			}
			for _, s := range b["subjects"].([]interface{}) {
				sm := s.(map[string]interface{})
				if sm["kind"] == "ServiceAccount" && ((len(byKind["ServiceAccount"]) > 0 && byKind["ServiceAccount"][sm["name"].(string)] == nil) || sm["namespace"] != releaseNamespace) {
					t.Errorf("%s %s: subject %v is not the rendered ServiceAccount", kind, name, sm)
				}
			}
		}
	}
	for name, dep := range byKind["Deployment"] {
		sa, _ := dig(dep, "spec", "template", "spec", "serviceAccountName").(string)
		if byKind["ServiceAccount"][sa] == nil && len(byKind["ServiceAccount"]) > 0 {
			t.Errorf("Deployment %s runs as ServiceAccount %q, which is not rendered", name, sa)
		}
		podLabels, _ := dig(dep, "spec", "template", "metadata", "labels").(map[string]interface{})
		sel, _ := dig(dep, "spec", "selector", "matchLabels").(map[string]interface{})
		if !subsetOf(sel, podLabels) {
			t.Errorf("Deployment %s: selector %v does not match its pod labels %v", name, sel, podLabels)
		}
		ports := map[string]bool{}
		for _, c := range dig(dep, "spec", "template", "spec", "containers").([]interface{}) {
			for _, p := range c.(map[string]interface{})["ports"].([]interface{}) {
				ports[p.(map[string]interface{})["name"].(string)] = true
			}
		}
		for sname, svc := range byKind["Service"] {
			sel, _ := dig(svc, "spec", "selector").(map[string]interface{})
			if !subsetOf(sel, podLabels) {
				t.Errorf("Service %s selects %v, not the operator pods", sname, sel)
			}
			for _, p := range dig(svc, "spec", "ports").([]interface{}) {
				if tp := p.(map[string]interface{})["targetPort"]; !ports[fmt.Sprint(tp)] {
					t.Errorf("Service %s: targetPort %v is not a container port name", sname, tp)
				}
			}
		}
	}
}

func subsetOf(sub, super map[string]interface{}) bool {
	if len(sub) == 0 {
		return false
	}
	for k, v := range sub {
		if super[k] != v {
			return false
		}
	}
	return true
}

// boundPermissions: the union of the rules of every role bound to the chart's
// ServiceAccount, as group/resource -> sorted verbs, and the namespace each applies in
// ("" for cluster-wide).
func boundPermissions(t *testing.T, r rendering) map[string]map[string][]string {
	t.Helper()
	roles := map[string]map[string]interface{}{}
	for _, d := range r.docs {
		if d["kind"] == "Role" || d["kind"] == "ClusterRole" {
			roles[d["kind"].(string)+"/"+dig(d, "metadata", "name").(string)] = d
		}
	}
	out := map[string]map[string][]string{}
	for _, b := range append(r.all("RoleBinding"), r.all("ClusterRoleBinding")...) {
		ref := b["roleRef"].(map[string]interface{})
		role := roles[ref["kind"].(string)+"/"+ref["name"].(string)]
		if role == nil {
			continue
		}
		scope, _ := dig(b, "metadata", "namespace").(string)
		if out[scope] == nil {
			out[scope] = map[string][]string{}
		}
		for _, rule := range role["rules"].([]interface{}) {
			rm := rule.(map[string]interface{})
			for _, g := range rm["apiGroups"].([]interface{}) {
				for _, res := range rm["resources"].([]interface{}) {
					key := fmt.Sprintf("%s/%s", g, res)
					for _, v := range rm["verbs"].([]interface{}) {
						out[scope][key] = append(out[scope][key], v.(string))
					}
				}
			}
		}
	}
	for _, perms := range out {
		for k := range perms {
			sort.Strings(perms[k])
		}
	}
	return out
}

func sortedPerms(p map[string][]string) map[string][]string {
	out := map[string][]string{}
	for k, v := range p {
		out[k] = append([]string{}, v...)
		sort.Strings(out[k])
	}
	return out
}

func containerOf(t *testing.T, dep map[string]interface{}) map[string]interface{} {
	t.Helper()
	cs := dig(dep, "spec", "template", "spec", "containers").([]interface{})
	if len(cs) != 1 {
		t.Fatalf("operator Deployment has %d containers, want 1", len(cs))
	}
	return cs[0].(map[string]interface{})
}

func args(c map[string]interface{}) []string {
	var out []string
	for _, a := range c["args"].([]interface{}) {
		out = append(out, a.(string))
	}
	return out
}

func hasArg(c map[string]interface{}, arg string) bool {
	for _, a := range args(c) {
		if a == arg {
			return true
		}
	}
	return false
}

func TestChartDefaults(t *testing.T) {
	r := renderChart(t, nil)
	dep := r.one(t, "Deployment")
	c := containerOf(t, dep)
	if dig(dep, "spec", "replicas") != int64(1) {
		t.Errorf("replicas %v", dig(dep, "spec", "replicas"))
	}
	if hasArg(c, "--leader-elect") {
		t.Error("--leader-elect with one replica")
	}
	if !hasArg(c, "--metrics-port=8080") {
		t.Errorf("args %v lack --metrics-port=8080", args(c))
	}
	for _, a := range args(c) {
		if strings.HasPrefix(a, "--namespace") {
			t.Errorf("cluster-wide by default, but args have %s", a)
		}
	}
	if c["image"] != "headroom-operator:0.1.0" {
		t.Errorf("image %v, want the appVersion tag", c["image"])
	}

	// Hardening.
	psc := dig(dep, "spec", "template", "spec", "securityContext").(map[string]interface{})
	if psc["runAsNonRoot"] != true || dig(psc, "seccompProfile", "type") != "RuntimeDefault" {
		t.Errorf("pod securityContext %v", psc)
	}
	if uid, _ := psc["runAsUser"].(int64); uid == 0 {
		t.Errorf("pod runs as uid %v", psc["runAsUser"])
	}
	sc := c["securityContext"].(map[string]interface{})
	if sc["allowPrivilegeEscalation"] != false || sc["readOnlyRootFilesystem"] != true || sc["runAsNonRoot"] != true ||
		!reflect.DeepEqual(dig(sc, "capabilities", "drop"), []interface{}{"ALL"}) || dig(sc, "seccompProfile", "type") != "RuntimeDefault" {
		t.Errorf("container securityContext %v", sc)
	}
	if dig(sc, "capabilities", "add") != nil || sc["privileged"] == true {
		t.Errorf("container gains privileges: %v", sc)
	}
	// Probes on the metrics port, resources set.
	if dig(c, "livenessProbe", "httpGet", "path") != "/healthz" || dig(c, "readinessProbe", "httpGet", "path") != "/readyz" ||
		dig(c, "livenessProbe", "httpGet", "port") != "metrics" {
		t.Errorf("probes %v %v", c["livenessProbe"], c["readinessProbe"])
	}
	for _, k := range []string{"requests", "limits"} {
		for _, res := range []string{"cpu", "memory"} {
			if dig(c, "resources", k, res) == nil {
				t.Errorf("no resources.%s.%s", k, res)
			}
		}
	}

	// RBAC: exactly what the operator uses, cluster-wide; no lease access.
	perms := boundPermissions(t, r)
	if len(perms) != 1 || !reflect.DeepEqual(perms[""], sortedPerms(operatorPermissions)) {
		t.Errorf("operator permissions %v,\nwant cluster-wide %v", perms, sortedPerms(operatorPermissions))
	}
	// The aggregated user roles exist and are bound to nobody by the chart.
	agg := 0
	for _, cr := range r.all("ClusterRole") {
		labels := dig(cr, "metadata", "labels").(map[string]interface{})
		if labels["rbac.authorization.k8s.io/aggregate-to-edit"] == "true" || labels["rbac.authorization.k8s.io/aggregate-to-view"] == "true" {
			agg++
		}
	}
	if agg != 2 {
		t.Errorf("%d aggregated TrainingJob ClusterRoles, want 2 (editor, viewer)", agg)
	}

	// The CRD is the one in crds/, kept on uninstall.
	crd := r.one(t, "CustomResourceDefinition")
	if dig(crd, "metadata", "annotations", "helm.sh/resource-policy") != "keep" {
		t.Error("CRD is not kept on uninstall")
	}
	source, err := DecodeYAMLFile(SourcePath("crds", "headroom.dev_trainingjobs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Compared as JSON, which is what reaches the API server (1.0 and 1 are one number).
	gotJSON, _ := json.Marshal(crd["spec"])
	wantJSON, _ := json.Marshal(source["spec"])
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("the chart's CRD spec differs from crds/headroom.dev_trainingjobs.yaml:\n%s\n%s", gotJSON, wantJSON)
	}

	// Dashboards for Grafana's sidecar, identical to configs/grafana.
	cms := r.all("ConfigMap")
	if len(cms) != 2 {
		t.Fatalf("%d dashboard ConfigMaps, want 2", len(cms))
	}
	for _, cm := range cms {
		if dig(cm, "metadata", "labels", "grafana_dashboard") != "1" {
			t.Errorf("ConfigMap %v lacks grafana_dashboard: \"1\"", dig(cm, "metadata", "name"))
		}
		for key, v := range cm["data"].(map[string]interface{}) {
			file := strings.TrimPrefix(key, "headroom-")
			want, err := os.ReadFile(SourcePath("configs", "grafana", file))
			if err != nil {
				t.Errorf("ConfigMap key %s: %v", key, err)
				continue
			}
			var got, wantJSON interface{}
			if err := json.Unmarshal([]byte(v.(string)), &got); err != nil {
				t.Errorf("ConfigMap key %s is not JSON: %v", key, err)
			}
			json.Unmarshal(want, &wantJSON)
			if !reflect.DeepEqual(got, wantJSON) {
				t.Errorf("ConfigMap key %s differs from configs/grafana/%s", key, file)
			}
		}
	}
	// Optional monitoring objects are off by default.
	for _, k := range []string{"ServiceMonitor", "PodMonitor", "PrometheusRule"} {
		if len(r.all(k)) != 0 {
			t.Errorf("%s rendered by default", k)
		}
	}
	if !strings.Contains(r.notes, "kubectl get tj") {
		t.Errorf("NOTES.txt does not say how to watch jobs:\n%s", r.notes)
	}
}

func TestChartLeaderElectionWithReplicas(t *testing.T) {
	r := renderChart(t, map[string]interface{}{"replicaCount": 3})
	c := containerOf(t, r.one(t, "Deployment"))
	if !hasArg(c, "--leader-elect") || !hasArg(c, "--lease-name="+releaseName+"-headroom") {
		t.Errorf("3 replicas without --leader-elect and a per-release --lease-name: %v", args(c))
	}
	// get/update only on this release's Lease (create cannot be limited by name).
	for _, role := range r.all("Role") {
		for _, rule := range role["rules"].([]interface{}) {
			rm := rule.(map[string]interface{})
			verbs := fmt.Sprint(rm["verbs"])
			if strings.Contains(verbs, "update") && !reflect.DeepEqual(rm["resourceNames"], []interface{}{releaseName + "-headroom"}) {
				t.Errorf("lease rule %v is not limited to the release's Lease", rm)
			}
		}
	}
	perms := boundPermissions(t, r)
	if !reflect.DeepEqual(perms[releaseNamespace], sortedPerms(leasePermissions)) {
		t.Errorf("lease permissions in %s: %v, want %v", releaseNamespace, perms[releaseNamespace], leasePermissions)
	}
	if !reflect.DeepEqual(perms[""], sortedPerms(operatorPermissions)) {
		t.Errorf("operator permissions changed with replicas: %v", perms[""])
	}
	forced := renderChart(t, map[string]interface{}{"leaderElection": map[string]interface{}{"force": true}})
	if !hasArg(containerOf(t, forced.one(t, "Deployment")), "--leader-elect") {
		t.Error("leaderElection.force does not add --leader-elect")
	}
}

func TestChartNamespaceScoped(t *testing.T) {
	r := renderChart(t, map[string]interface{}{"watch": map[string]interface{}{"namespace": "training"},
		"podMonitor": map[string]interface{}{"enabled": true}})
	c := containerOf(t, r.one(t, "Deployment"))
	if !hasArg(c, "--namespace=training") {
		t.Errorf("args %v lack --namespace=training", args(c))
	}
	perms := boundPermissions(t, r)
	if len(perms) != 1 || !reflect.DeepEqual(perms["training"], sortedPerms(operatorPermissions)) {
		t.Errorf("scoped permissions %v, want only namespace training with %v", perms, operatorPermissions)
	}
	if len(r.all("ClusterRoleBinding")) != 0 {
		t.Error("a namespace-scoped install binds a ClusterRole")
	}
	pm := r.one(t, "PodMonitor")
	if !reflect.DeepEqual(dig(pm, "spec", "namespaceSelector", "matchNames"), []interface{}{"training"}) {
		t.Errorf("PodMonitor namespaceSelector %v", dig(pm, "spec", "namespaceSelector"))
	}

	// With leader election the operator keeps its Lease in the namespace it watches
	// (headroom-operator --namespace), so that is where it may use Leases.
	r = renderChart(t, map[string]interface{}{"watch": map[string]interface{}{"namespace": "training"}, "replicaCount": 2})
	perms = boundPermissions(t, r)
	want := sortedPerms(operatorPermissions)
	for k, v := range leasePermissions {
		want[k] = append([]string{}, v...)
		sort.Strings(want[k])
	}
	if len(perms) != 1 || !reflect.DeepEqual(perms["training"], want) {
		t.Errorf("scoped, leader-elected permissions %v, want only namespace training with %v", perms, want)
	}
}

func TestChartMonitoring(t *testing.T) {
	r := renderChart(t, map[string]interface{}{
		"serviceMonitor": map[string]interface{}{"enabled": true, "labels": map[string]interface{}{"release": "prom"}},
		"podMonitor":     map[string]interface{}{"enabled": true},
		"prometheusRule": map[string]interface{}{"enabled": true},
	})
	sm := r.one(t, "ServiceMonitor")
	if dig(sm, "metadata", "labels", "release") != "prom" {
		t.Error("serviceMonitor.labels not applied")
	}
	svc := r.one(t, "Service")
	if !subsetOf(dig(sm, "spec", "selector", "matchLabels").(map[string]interface{}), dig(svc, "metadata", "labels").(map[string]interface{})) {
		t.Error("ServiceMonitor does not select the metrics Service")
	}
	ep := dig(sm, "spec", "endpoints").([]interface{})[0].(map[string]interface{})
	if ep["port"] != "metrics" || ep["path"] != "/metrics" {
		t.Errorf("ServiceMonitor endpoint %v", ep)
	}

	pm := r.one(t, "PodMonitor")
	expr := dig(pm, "spec", "selector", "matchExpressions").([]interface{})[0].(map[string]interface{})
	if expr["key"] != "headroom.dev/job-name" || expr["operator"] != "Exists" {
		t.Errorf("PodMonitor selector %v", expr)
	}
	pep := dig(pm, "spec", "podMetricsEndpoints").([]interface{})[0].(map[string]interface{})
	if pep["port"] != "metrics" || pep["honorLabels"] != true {
		t.Errorf("PodMonitor endpoint %v (want port metrics, honorLabels true)", pep)
	}
	if dig(pm, "spec", "namespaceSelector", "any") != true {
		t.Error("cluster-wide PodMonitor does not select any namespace")
	}

	pr := r.one(t, "PrometheusRule")
	src, err := DecodeYAMLFile(SourcePath("configs", "prometheus", "headroom.rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dig(pr, "spec", "groups"), src["groups"]) {
		t.Error("PrometheusRule groups differ from configs/prometheus/headroom.rules.yaml")
	}
}

func TestChartToggles(t *testing.T) {
	r := renderChart(t, map[string]interface{}{
		"crds":           map[string]interface{}{"install": false},
		"dashboards":     map[string]interface{}{"enabled": false},
		"rbac":           map[string]interface{}{"create": false},
		"serviceAccount": map[string]interface{}{"create": false, "name": "existing"},
	})
	for _, k := range []string{"CustomResourceDefinition", "ConfigMap", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "ServiceAccount"} {
		if len(r.all(k)) != 0 {
			t.Errorf("%s rendered although switched off", k)
		}
	}
	if sa := dig(r.one(t, "Deployment"), "spec", "template", "spec", "serviceAccountName"); sa != "existing" {
		t.Errorf("serviceAccountName %v, want the existing account", sa)
	}
	chart, _ := LoadChart(SourcePath("charts", "headroom"))
	rel := Release{Name: releaseName, Namespace: releaseNamespace, Service: "Helm"}
	for what, overrides := range map[string]map[string]interface{}{
		"image.repository":    {"image": map[string]interface{}{"repository": ""}},
		"serviceAccount.name": {"serviceAccount": map[string]interface{}{"create": false, "name": ""}},
	} {
		if _, _, err := chart.Render(rel, overrides, "v1.29.0", nil); err == nil || !strings.Contains(err.Error(), what) {
			t.Errorf("rendering without %s: error %v, want one naming it", what, err)
		}
	}
}

// The chart ships copies (a chart cannot read files outside its folder); they must be
// byte-identical to the sources.
func TestChartFileCopiesMatchSources(t *testing.T) {
	for copyPath, source := range map[string]string{
		"files/crds/headroom.dev_trainingjobs.yaml": "crds/headroom.dev_trainingjobs.yaml",
		"files/dashboards/trainingjob.json":         "configs/grafana/trainingjob.json",
		"files/dashboards/operator.json":            "configs/grafana/operator.json",
		"files/prometheus/headroom.rules.yaml":      "configs/prometheus/headroom.rules.yaml",
	} {
		a, errA := os.ReadFile(SourcePath("charts", "headroom", copyPath))
		b, errB := os.ReadFile(SourcePath(source))
		if errA != nil || errB != nil {
			t.Errorf("%v %v", errA, errB)
			continue
		}
		if !bytes.Equal(a, b) {
			t.Errorf("charts/headroom/%s differs from %s: cp %s charts/headroom/%s", copyPath, source, source, copyPath)
		}
	}
}

// Every values.yaml key is documented (a comment above it or its parent block).
func TestChartValuesDocumented(t *testing.T) {
	text, err := os.ReadFile(SourcePath("charts", "headroom", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(text), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "#") || strings.TrimSpace(l) == "" || strings.HasPrefix(l, " ") {
			continue
		}
		if i == 0 || !strings.HasPrefix(strings.TrimSpace(lines[i-1]), "#") {
			// A top-level block is documented when its children are.
			documented := false
			for j := i + 1; j < len(lines) && strings.HasPrefix(lines[j], " "); j++ {
				if strings.HasPrefix(strings.TrimSpace(lines[j]), "#") {
					documented = true
				}
			}
			if !documented {
				t.Errorf("values.yaml line %d: %q is not documented", i+1, l)
			}
		}
	}
}
