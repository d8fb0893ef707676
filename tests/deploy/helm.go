// A renderer for Helm charts with the template semantics Helm 3 gives and that
// charts/headroom uses, so the chart can be rendered and checked where helm itself cannot
// be installed (Debian does not package it).
//
// What matches Helm:
//   - every file under templates/ is parsed into one template set (so `define`s in
//     _helpers.tpl are shared); files whose name starts with "_" are not rendered;
//     NOTES.txt is rendered separately, as helm does after install.
//   - functions: sprig's TxtFuncMap without env/expandenv (as helm), plus include, tpl,
//     required, toYaml, fromYaml, toJson, fromJson, lookup (always empty, as in
//     `helm template`).
//   - values: values.yaml deep-merged with overrides (maps merge, everything else
//     replaces; a null override deletes the key, as `--set key=null`).
//   - objects: .Values, .Release (Name, Namespace, Service, IsInstall, IsUpgrade,
//     Revision), .Chart (Chart.yaml fields, capitalised), .Capabilities (KubeVersion,
//     APIVersions.Has), .Files (Get, over every non-template file), .Template.
//   - missing keys render as empty, not "<no value>" (helm's non-strict mode).
//
// Not implemented (the chart must not use them): subcharts, hooks, .Files.Glob/AsConfig,
// lookup against a cluster, schema validation of values (values.schema.json).
package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	yamlv2 "gopkg.in/yaml.v2"
	"gopkg.in/yaml.v3"
)

// Chart is a chart directory loaded into memory.
type Chart struct {
	Dir       string
	Metadata  map[string]interface{} // Chart.yaml
	Values    map[string]interface{} // values.yaml
	Templates map[string]string      // "templates/deployment.yaml" -> text
	Files     ChartFiles             // every other file, by chart-relative path
}

// ChartFiles is .Files in templates.
type ChartFiles map[string][]byte

// Get returns a file's content, or "" when it is absent (as helm does).
func (f ChartFiles) Get(name string) string { return string(f[name]) }

// Release is .Release.
type Release struct {
	Name, Namespace, Service string
	IsInstall, IsUpgrade     bool
	Revision                 int
}

// APIVersions is .Capabilities.APIVersions.
type APIVersions []string

// Has reports whether the cluster serves a group/version (or group/version/Kind).
func (a APIVersions) Has(v string) bool {
	for _, x := range a {
		if x == v {
			return true
		}
	}
	return false
}

// LoadChart reads Chart.yaml, values.yaml, templates/ and the other files of dir.
func LoadChart(dir string) (*Chart, error) {
	c := &Chart{Dir: dir, Templates: map[string]string{}, Files: ChartFiles{}}
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		relPath, _ := filepath.Rel(dir, path)
		relPath = filepath.ToSlash(relPath)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(relPath, "templates/"):
			c.Templates[relPath] = string(data)
		default:
			c.Files[relPath] = data
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(c.Files["Chart.yaml"], &c.Metadata); err != nil || c.Metadata == nil {
		return nil, fmt.Errorf("%s/Chart.yaml: %v", dir, err)
	}
	if err := yaml.Unmarshal(c.Files["values.yaml"], &c.Values); err != nil {
		return nil, fmt.Errorf("%s/values.yaml: %v", dir, err)
	}
	if c.Values == nil {
		c.Values = map[string]interface{}{}
	}
	return c, nil
}

// MergeValues deep-merges override onto base (a copy); maps merge, other values replace,
// a nil override removes the key.
func MergeValues(base, override map[string]interface{}) map[string]interface{} {
	out := deepCopy(base).(map[string]interface{})
	for k, v := range override {
		if v == nil {
			delete(out, k)
			continue
		}
		if bm, ok := out[k].(map[string]interface{}); ok {
			if om, ok := v.(map[string]interface{}); ok {
				out[k] = MergeValues(bm, om)
				continue
			}
		}
		out[k] = deepCopy(v)
	}
	return out
}

// chartObject is .Chart: Chart.yaml's keys with the first letter capitalised.
func (c *Chart) chartObject() map[string]interface{} {
	out := map[string]interface{}{}
	for k, v := range c.Metadata {
		out[strings.ToUpper(k[:1])+k[1:]] = v
	}
	return out
}

func toYAML(v interface{}) string {
	data, err := yamlv2.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

func fromYAML(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func toJSON(v interface{}) string {
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(data)
}

func fromJSON(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

// Rendered is one rendered template.
type Rendered struct {
	Template string // "templates/deployment.yaml"
	Text     string
}

// Render renders every template with values.yaml merged with overrides.
// kubeVersion is like "v1.29.0"; apiVersions lists what .Capabilities.APIVersions.Has
// should find (e.g. "monitoring.coreos.com/v1").
func (c *Chart) Render(rel Release, overrides map[string]interface{}, kubeVersion string, apiVersions []string) ([]Rendered, string, error) {
	values := MergeValues(c.Values, overrides)
	root := template.New("chart")
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	funcs["toYaml"] = toYAML
	funcs["fromYaml"] = fromYAML
	funcs["toJson"] = toJSON
	funcs["fromJson"] = fromJSON
	funcs["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return nil, fmt.Errorf(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return nil, fmt.Errorf(msg)
		}
		return v, nil
	}
	funcs["lookup"] = func(string, string, string, string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	funcs["include"] = func(name string, data interface{}) (string, error) {
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	funcs["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, data); err != nil {
			return "", err
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	root.Funcs(funcs).Option("missingkey=zero")

	names := make([]string, 0, len(c.Templates))
	for n := range c.Templates {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, err := root.New(n).Parse(c.Templates[n]); err != nil {
			return nil, "", fmt.Errorf("parse %s: %v", n, err)
		}
	}
	major, minor := "1", "29"
	if parts := strings.Split(strings.TrimPrefix(kubeVersion, "v"), "."); len(parts) >= 2 {
		major, minor = parts[0], parts[1]
	}
	data := map[string]interface{}{
		"Values":  values,
		"Release": rel,
		"Chart":   c.chartObject(),
		"Files":   c.Files,
		"Capabilities": map[string]interface{}{
			"KubeVersion": map[string]interface{}{"Version": kubeVersion, "GitVersion": kubeVersion, "Major": major, "Minor": minor},
			"APIVersions": APIVersions(apiVersions),
		},
	}
	var out []Rendered
	notes := ""
	for _, n := range names {
		base := filepath.Base(n)
		if strings.HasPrefix(base, "_") {
			continue
		}
		data["Template"] = map[string]interface{}{"Name": n, "BasePath": "templates"}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, n, data); err != nil {
			return nil, "", fmt.Errorf("render %s: %v", n, err)
		}
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		if base == "NOTES.txt" {
			notes = text
			continue
		}
		out = append(out, Rendered{Template: n, Text: text})
	}
	return out, notes, nil
}
