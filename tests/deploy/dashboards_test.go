package deploy

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

func loadDashboards(t *testing.T) map[string]Dashboard {
	t.Helper()
	d, err := LoadDashboards(SourcePath("configs", "grafana"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"trainingjob.json", "operator.json"} {
		if d[want] == nil {
			t.Fatalf("configs/grafana/%s is missing", want)
		}
	}
	return d
}

// Values Grafana would give the variables when "All" is selected; what promtool parses.
var parseVariables = map[string]string{
	"datasource": "prometheus", "namespace": ".*", "job": ".*", "rank": ".*",
	"operator_job": ".*", "host_threshold": "0.90", "gpu_threshold": "0.92",
	"__rate_interval": "1m", "__interval": "30s", "__range": "1h",
}

func TestDashboardStructure(t *testing.T) {
	names, err := MetricNamesFromHeader(SourcePath("core", "metrics", "names.h"))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, n := range names {
		known[n] = true
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			known[n+suffix] = true
		}
	}

	uids := map[string]string{}
	used := map[string]bool{}
	for file, d := range loadDashboards(t) {
		uid, _ := d["uid"].(string)
		if uid == "" || d["title"] == nil {
			t.Errorf("%s: no uid or title", file)
		}
		if other, dup := uids[uid]; dup {
			t.Errorf("%s and %s share uid %q", file, other, uid)
		}
		uids[uid] = file
		vars := map[string]bool{"__rate_interval": true, "__interval": true, "__range": true}
		for _, v := range d.VariableNames() {
			vars[v] = true
		}
		if !vars["datasource"] {
			t.Errorf("%s: no datasource variable (Grafana's sidecar import needs one)", file)
		}
		ids := map[float64]bool{}
		for _, p := range d.Panels() {
			title, _ := p["title"].(string)
			id, _ := p["id"].(float64)
			if ids[id] {
				t.Errorf("%s: panel id %v used twice", file, id)
			}
			ids[id] = true
			if x, _ := dig(p, "gridPos", "x").(float64); x+func() float64 { w, _ := dig(p, "gridPos", "w").(float64); return w }() > 24 {
				t.Errorf("%s: panel %q is wider than the grid", file, title)
			}
			if p["type"] == "row" {
				continue
			}
			if title == "" || p["description"] == nil {
				t.Errorf("%s: a panel without title or description: %v", file, p["id"])
			}
			if targets, _ := p["targets"].([]interface{}); len(targets) == 0 {
				t.Errorf("%s: panel %q has no queries", file, title)
			}
		}
		for _, q := range d.Queries(file) {
			for _, v := range UsedVariables(q.Expr) {
				if !vars[v] {
					t.Errorf("%s: uses undefined variable $%s", q, v)
				}
			}
			for _, s := range SeriesNames(q.Expr) {
				used[s] = true
				if strings.HasPrefix(s, "headroom_") && !known[s] {
					t.Errorf("%s: reads %s, which core/metrics/names.h does not define", q, s)
				}
			}
		}
	}
	// Every metric docs/design.md names is on a dashboard.
	for _, n := range names {
		if !used[n] && !used[n+"_bucket"] {
			t.Errorf("metric %s is on no dashboard", n)
		}
	}
	// Joinable: DCGM exporter and kube-state-metrics series appear, selected by pod.
	for _, s := range []string{"DCGM_FI_DEV_FB_USED", "kube_pod_container_status_terminated_reason", "kube_pod_container_resource_limits"} {
		if !used[s] {
			t.Errorf("no dashboard joins %s", s)
		}
	}
}

// Every panel and annotation query parses: promtool checks a rules file holding each
// expression as a recording rule, in a group named after its panel.
func TestDashboardsParse(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("SKIP: promtool not found (Debian package prometheus)")
	}
	var b strings.Builder
	b.WriteString("groups:\n")
	count := 0
	for file, d := range loadDashboards(t) {
		for _, q := range d.Queries(file) {
			expr, err := Substitute(q.Expr, parseVariables)
			if err != nil {
				t.Errorf("%s: %v", q, err)
				continue
			}
			name, _ := json.Marshal(q.String())
			exprJSON, _ := json.Marshal(expr)
			fmt.Fprintf(&b, "  - name: %s\n    rules:\n      - record: dashboard:query_%d\n        expr: %s\n", name, count, exprJSON)
			count++
		}
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.rules.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules failed on dashboard queries:\n%s", out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("SUCCESS: %d rules found", count)) {
		t.Errorf("promtool checked a different number of queries than the %d written:\n%s", count, out)
	}
	t.Logf("%d dashboard queries parse", count)
}

// Queries allowed to return nothing in the local run, and why.
var emptyAllowed = map[string]string{
	"trainingjob.json / \"annotation: Worker restarts\"":                            "fires only when a worker restarts; this run has none",
	"trainingjob.json / \"Reward (mean)\" / B":                                      "held-out reward: text tasks with dataset.heldOut only; this run's task is generated",
	"trainingjob.json / \"Held-out accuracy\"":                                      "text tasks with dataset.heldOut only; this run's task is generated",
	"trainingjob.json / \"Model download from the Hub (spec.model.hub), per rank\"": "only while a hub model downloads; this run's model is a preset",
}

// serveClusterFixtures serves, in their real exposition shapes, the series of the parts a
// local run does not have: the operator (docs/design.md names and labels), kube-state-metrics
// and the DCGM exporter, for a worker pod of job `jobName`. Counters grow with time so
// rate() and increase() see them move. It proves the dashboards' joins and selectors
// (by namespace and pod `<job>-worker-<rank>`) find such series; the worker series come
// from the real worker.
func serveClusterFixtures(t *testing.T, jobName string) (port int, stop func()) {
	t.Helper()
	start := time.Now()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pod := fmt.Sprintf(`namespace="training",pod="%s-worker-0"`, jobName)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := time.Since(start).Seconds()
		var b strings.Builder
		line := func(format string, args ...interface{}) { fmt.Fprintf(&b, format+"\n", args...) }
		line(`headroom_operator_reconcile_total{result="success"} %d`, int(10*n))
		line(`headroom_operator_reconcile_total{result="error"} %d`, int(n/2))
		for _, le := range []string{"0.005", "0.05", "0.5", "+Inf"} {
			line(`headroom_operator_reconcile_duration_seconds_bucket{le="%s"} %d`, le, int(10*n))
		}
		line(`headroom_operator_reconcile_duration_seconds_sum %f`, 0.01*n)
		line(`headroom_operator_reconcile_duration_seconds_count %d`, int(10*n))
		line(`headroom_operator_workqueue_depth{name="trainingjob"} 3`)
		line(`headroom_operator_workqueue_waiting{name="trainingjob"} 12`)
		line(`headroom_operator_workqueue_processing{name="trainingjob"} 1`)
		line(`headroom_operator_jobs{phase="Running"} 1`)
		line(`headroom_operator_jobs{phase="Restarting"} 0`)
		line(`headroom_operator_guard_actions_total{action="restart",reason="host_forecast"} %d`, int(n/3))
		line(`kube_pod_status_phase{%s,uid="u0",phase="Running"} 1`, pod)
		line(`kube_pod_container_resource_limits{%s,uid="u0",container="worker",node="n0",resource="memory",unit="byte"} 2147483648`, pod)
		line(`kube_pod_container_status_terminated_reason{%s,uid="u0",container="worker",reason="OOMKilled"} 1`, pod)
		line(`DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-0",device="nvidia0",modelName="H100",Hostname="n0",container="worker",%s} %d`, pod, 1000+int(n))
		line(`DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-0",device="nvidia0",modelName="H100",Hostname="n0",container="worker",%s} 80000`, pod)
		line(`DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-0",device="nvidia0",modelName="H100",Hostname="n0",container="worker",%s} 87`, pod)
		io.WriteString(w, b.String())
	})}
	go srv.Serve(l)
	return l.Addr().(*net.TCPAddr).Port, func() { srv.Close() }
}

func emptyAllowedReason(q PanelQuery) (string, bool) {
	for _, key := range []string{q.Dashboard, fmt.Sprintf("%s / %q", q.Dashboard, q.Panel), q.String()} {
		if r, ok := emptyAllowed[key]; ok {
			return r, true
		}
	}
	return "", false
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func httpGet(u string) (string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return string(body), fmt.Errorf("%s: HTTP %d", u, resp.StatusCode)
	}
	return string(body), err
}

type promResult struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		Result []json.RawMessage `json:"result"`
	} `json:"data"`
}

func promQuery(base, expr string) (promResult, error) {
	var r promResult
	body, err := httpGet(base + "/api/v1/query?query=" + url.QueryEscape(expr))
	if jerr := json.Unmarshal([]byte(body), &r); jerr != nil {
		if err == nil {
			err = jerr
		}
		return r, err
	}
	if r.Status != "success" {
		return r, fmt.Errorf("query failed: %s", r.Error)
	}
	return r, nil
}

// startProcess starts cmd with its output in logPath; the returned stop ends it.
func startProcess(t *testing.T, logPath string, name string, args []string, env []string) func() {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	return func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		logFile.Close()
	}
}

// grepLines keeps the lines of text that contain needle.
func grepLines(text, needle string) string {
	var kept []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, needle) {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "\n")
}

func tail(path string) string {
	data, _ := os.ReadFile(path)
	if len(data) > 3000 {
		data = data[len(data)-3000:]
	}
	return string(data)
}

// The dashboards against a real Prometheus scraping a real headroom-worker (and the
// cluster fixtures above): every panel query returns data, except those listed in
// emptyAllowed with the reason.
func TestDashboardsReturnData(t *testing.T) {
	binDir := os.Getenv("HEADROOM_BINARY_DIR")
	if binDir == "" {
		binDir = SourcePath("build")
	}
	worker := filepath.Join(binDir, "bin", "headroom-worker")
	if _, err := os.Stat(worker); err != nil {
		t.Skipf("SKIP: %s is not built (cmake --build <build> --target headroom-worker)", worker)
	}
	prometheus, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("SKIP: prometheus not found (Debian package prometheus)")
	}
	dir := t.TempDir()
	jobName := "dashboard-data"
	job := fmt.Sprintf(`apiVersion: headroom.dev/v1alpha1
kind: TrainingJob
metadata: {name: %s}
spec:
  workers: 1
  resources: {cpu: "1", memory: 2Gi, gpus: 0}
  model: {preset: tiny}
  task: {name: reverse, digits: 3, seed: 1}
  grpo: {steps: 100000, promptsPerStep: 4, groupSize: 2, maxPromptLength: 8, maxResponseLength: 6, microBatchSize: 8, klCoef: 0.01}
  sharding: {stage: 0}
  checkpoint: {everySteps: 100000, keep: 1}
`, jobName)
	jobPath := filepath.Join(dir, "job.yaml")
	os.WriteFile(jobPath, []byte(job), 0o644)

	metricsPort, promPort := freePort(t), freePort(t)
	stopWorker := startProcess(t, filepath.Join(dir, "worker.log"), worker,
		[]string{"--job", jobPath, "--checkpoint-dir", filepath.Join(dir, "ckpt"),
			"--metrics-port", fmt.Sprint(metricsPort), "--log", filepath.Join(dir, "steps.jsonl")},
		[]string{"RANK=0", "WORLD_SIZE=1", "MASTER_ADDR=127.0.0.1", fmt.Sprintf("MASTER_PORT=%d", freePort(t)),
			"HEADROOM_TERMINATION_LOG=" + filepath.Join(dir, "termination.log")})
	defer stopWorker()

	fixturePort, stopFixtures := serveClusterFixtures(t, jobName)
	defer stopFixtures()
	config := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: headroom-workers
    honor_labels: true   # keep the worker's job label (the TrainingJob), as the chart's PodMonitor does
    static_configs: [{targets: ["127.0.0.1:%d"]}]
  - job_name: headroom-operator
    static_configs: [{targets: ["127.0.0.1:%d"]}]
`, metricsPort, fixturePort)
	configPath := filepath.Join(dir, "prometheus.yml")
	os.WriteFile(configPath, []byte(config), 0o644)
	stopProm := startProcess(t, filepath.Join(dir, "prometheus.log"), prometheus,
		[]string{"--config.file=" + configPath, "--storage.tsdb.path=" + filepath.Join(dir, "tsdb"),
			fmt.Sprintf("--web.listen-address=127.0.0.1:%d", promPort), "--log.level=warn"}, nil)
	defer stopProm()
	base := fmt.Sprintf("http://127.0.0.1:%d", promPort)

	// Wait for 12 s of scrapes with the step moving, so rates and quantiles have data.
	deadline := time.Now().Add(90 * time.Second)
	ready := false
	for time.Now().Before(deadline) {
		time.Sleep(time.Second)
		r, err := promQuery(base, fmt.Sprintf(`count_over_time(headroom_worker_step{job=%q}[30s]) >= 12 and changes(headroom_worker_step{job=%q}[30s]) >= 2`, jobName, jobName))
		if err == nil && len(r.Data.Result) > 0 {
			ready = true
			break
		}
	}
	if !ready {
		// Say which side failed: the worker not stepping, or Prometheus not scraping it.
		targets, terr := httpGet(base + "/api/v1/targets")
		metrics, merr := httpGet(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
		t.Fatalf("no steady worker series in Prometheus after 90 s\nworker log:\n%s\nstep log:\n%s\n"+
			"prometheus log:\n%s\nprometheus targets (%v):\n%s\nworker /metrics (%v):\n%s",
			tail(filepath.Join(dir, "worker.log")), tail(filepath.Join(dir, "steps.jsonl")),
			tail(filepath.Join(dir, "prometheus.log")), terr, targets, merr, grepLines(metrics, "headroom_worker_step"))
	}

	vars := map[string]string{}
	for k, v := range parseVariables {
		vars[k] = v
	}
	vars["job"] = jobName
	vars["__rate_interval"] = "20s"
	vars["__interval"] = "10s"
	vars["__range"] = "1m"
	withData, allowed := 0, 0
	dashboards := loadDashboards(t)
	files := make([]string, 0, len(dashboards))
	for f := range dashboards {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, file := range files {
		for _, q := range dashboards[file].Queries(file) {
			expr, err := Substitute(q.Expr, vars)
			if err != nil {
				t.Errorf("%s: %v", q, err)
				continue
			}
			r, err := promQuery(base, expr)
			if err != nil {
				t.Errorf("%s: %v\n  %s", q, err, expr)
				continue
			}
			if len(r.Data.Result) > 0 {
				withData++
				continue
			}
			if reason, ok := emptyAllowedReason(q); ok {
				allowed++
				t.Logf("empty (allowed: %s): %s", reason, q)
				continue
			}
			t.Errorf("%s returned no data:\n  %s", q, expr)
		}
	}
	t.Logf("%d queries returned data, %d allowed empty", withData, allowed)
	if t.Failed() {
		metrics, _ := httpGet(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
		t.Logf("worker /metrics:\n%s", metrics)
	}
}
