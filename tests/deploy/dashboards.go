// The Grafana dashboards of configs/grafana, read as data: their panel queries with
// Grafana's template variables substituted, ready for promtool or a Prometheus server.
package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
)

// PanelQuery is one PromQL expression of a dashboard.
type PanelQuery struct {
	Dashboard string // file name, e.g. trainingjob.json
	Panel     string // panel title, or "annotation: <name>"
	RefID     string
	Expr      string
}

func (q PanelQuery) String() string {
	return fmt.Sprintf("%s / %q / %s", q.Dashboard, q.Panel, q.RefID)
}

// Dashboard is a decoded dashboard JSON.
type Dashboard map[string]interface{}

// LoadDashboards reads every *.json in dir, by file name.
func LoadDashboards(dir string) (map[string]Dashboard, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	out := map[string]Dashboard{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var d Dashboard
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = d
	}
	return out, nil
}

// Panels returns every panel, rows' nested panels included, in order.
func (d Dashboard) Panels() []map[string]interface{} {
	var out []map[string]interface{}
	var walk func(list []interface{})
	walk = func(list []interface{}) {
		for _, p := range list {
			m, ok := p.(map[string]interface{})
			if !ok {
				continue
			}
			out = append(out, m)
			if nested, ok := m["panels"].([]interface{}); ok {
				walk(nested)
			}
		}
	}
	panels, _ := d["panels"].([]interface{})
	walk(panels)
	return out
}

// Queries returns the PromQL of every panel target and every annotation.
func (d Dashboard) Queries(file string) []PanelQuery {
	var out []PanelQuery
	for _, p := range d.Panels() {
		title, _ := p["title"].(string)
		targets, _ := p["targets"].([]interface{})
		for _, t := range targets {
			tm, _ := t.(map[string]interface{})
			expr, _ := tm["expr"].(string)
			ref, _ := tm["refId"].(string)
			out = append(out, PanelQuery{file, title, ref, expr})
		}
	}
	annotations, _ := dig(map[string]interface{}(d), "annotations", "list").([]interface{})
	for _, a := range annotations {
		am, _ := a.(map[string]interface{})
		if expr, ok := am["expr"].(string); ok {
			out = append(out, PanelQuery{file, "annotation: " + fmt.Sprint(am["name"]), "", expr})
		}
	}
	return out
}

// VariableNames lists the dashboard's templating variables.
func (d Dashboard) VariableNames() []string {
	var out []string
	list, _ := dig(map[string]interface{}(d), "templating", "list").([]interface{})
	for _, v := range list {
		if m, ok := v.(map[string]interface{}); ok {
			out = append(out, fmt.Sprint(m["name"]))
		}
	}
	sort.Strings(out)
	return out
}

var grafanaVarRE = regexp.MustCompile(`\$\{?(\w+)\}?`)

// UsedVariables lists the $variables an expression uses.
func UsedVariables(expr string) []string {
	var out []string
	for _, m := range grafanaVarRE.FindAllStringSubmatch(expr, -1) {
		out = append(out, m[1])
	}
	return out
}

// Substitute replaces Grafana variables ($x and ${x}) by vars; an unknown variable is
// an error, so a typo in a dashboard never reaches Prometheus as literal text.
func Substitute(expr string, vars map[string]string) (string, error) {
	var missing []string
	out := grafanaVarRE.ReplaceAllStringFunc(expr, func(m string) string {
		name := grafanaVarRE.FindStringSubmatch(m)[1]
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("unknown variables %v in %q", missing, expr)
	}
	return out, nil
}

// MetricNamesFromHeader reads the metric names of core/metrics/names.h.
func MetricNamesFromHeader(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	re := regexp.MustCompile(`"(headroom_(?:worker|operator)_\w+)"`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(string(data), -1) {
		out = append(out, m[1])
	}
	return out, nil
}

var seriesNameRE = regexp.MustCompile(`\b(headroom_\w+|DCGM_FI_\w+|kube_\w+)`)

// SeriesNames lists the headroom, DCGM exporter and kube-state-metrics series names an
// expression reads.
func SeriesNames(expr string) []string {
	return seriesNameRE.FindAllString(expr, -1)
}
