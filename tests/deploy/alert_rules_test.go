package deploy

import (
	"strings"
	"testing"
)

// The alert rules read only series that exist: headroom's own (core/metrics/names.h)
// and kube-state-metrics'; every alert has a severity, a summary and a description.
// promtool checks the syntax and the behaviour (configs/prometheus/tests).
func TestAlertRulesUseKnownSeries(t *testing.T) {
	names, err := MetricNamesFromHeader(SourcePath("core", "metrics", "names.h"))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, n := range names {
		known[n] = true
	}
	doc, err := DecodeYAMLFile(SourcePath("configs", "prometheus", "headroom.rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	alerts := 0
	for _, g := range doc["groups"].([]interface{}) {
		for _, r := range g.(map[string]interface{})["rules"].([]interface{}) {
			rule := r.(map[string]interface{})
			name, _ := rule["alert"].(string)
			expr, _ := rule["expr"].(string)
			alerts++
			for _, s := range SeriesNames(expr) {
				if strings.HasPrefix(s, "headroom_") && !known[s] {
					t.Errorf("%s reads %s, which core/metrics/names.h does not define", name, s)
				}
			}
			if dig(rule, "labels", "severity") == nil {
				t.Errorf("%s has no severity label", name)
			}
			for _, a := range []string{"summary", "description"} {
				if s, _ := dig(rule, "annotations", a).(string); s == "" {
					t.Errorf("%s has no %s", name, a)
				}
			}
		}
	}
	if alerts < 4 {
		t.Errorf("%d alerts; want at least memory forecast, guard storm, OOMKilled, no progress", alerts)
	}
}
