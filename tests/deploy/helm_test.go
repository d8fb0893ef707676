package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The renderer itself, on a throwaway chart: the helm behaviours the real chart's test
// relies on.
func TestChartRendererHelmSemantics(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"Chart.yaml":             "apiVersion: v2\nname: demo\nversion: 1.2.3\nappVersion: \"4.5\"\n",
		"values.yaml":            "greeting: hello\nnested: {a: 1, b: 2}\nlist: [x, y]\nmessage: \"{{ .Values.greeting }} from tpl\"\n",
		"files/data.txt":         "file content",
		"templates/_helpers.tpl": `{{- define "demo.name" -}}{{ .Chart.Name }}-{{ .Release.Name }}{{- end }}`,
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "demo.name" . }}
  namespace: {{ .Release.Namespace }}
data:
  missing: "{{ .Values.doesNotExist }}"
  tpl: {{ tpl .Values.message . | quote }}
  file: {{ .Files.Get "files/data.txt" | quote }}
  version: {{ .Chart.AppVersion | quote }}
  upper: {{ .Values.greeting | upper | quote }}
  roundtrip: {{ (fromYaml (toYaml .Values.nested)).b | quote }}
  nested: |
    {{- toYaml .Values.nested | nindent 4 }}
  list: {{ toJson .Values.list | quote }}
  capabilities: {{ .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" | quote }}
`,
		"templates/NOTES.txt": "notes for {{ .Release.Name }}",
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(text), 0o644)
	}
	chart, err := LoadChart(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, notes, err := chart.Render(Release{Name: "rel", Namespace: "ns", Service: "Helm"},
		map[string]interface{}{"nested": map[string]interface{}{"b": 3}, "greeting": "hi"}, "v1.29.0", []string{"monitoring.coreos.com/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].Template != "templates/cm.yaml" {
		t.Fatalf("rendered %v; partials and NOTES.txt must not render as manifests", out)
	}
	if notes != "notes for rel" {
		t.Errorf("NOTES.txt rendered as %q", notes)
	}
	docs, err := DecodeYAMLDocuments([]byte(out[0].Text))
	if err != nil {
		t.Fatalf("%v\n%s", err, out[0].Text)
	}
	data := docs[0]["data"].(map[string]interface{})
	want := map[string]string{
		"missing": "", "tpl": "hi from tpl", "file": "file content", "version": "4.5", "upper": "HI",
		"roundtrip": "3", "nested": "a: 1\nb: 3\n", "list": `["x","y"]`, "capabilities": "true",
	}
	for k, v := range want {
		if data[k] != v {
			t.Errorf("data.%s = %q, want %q", k, data[k], v)
		}
	}
	if dig(docs[0], "metadata", "name") != "demo-rel" || dig(docs[0], "metadata", "namespace") != "ns" {
		t.Errorf("include/.Release: metadata %v", docs[0]["metadata"])
	}

	// required fails the render with its message; env is not available (as in helm).
	chart.Templates["templates/req.yaml"] = `x: {{ required "need .Values.nope" .Values.nope }}`
	if _, _, err := chart.Render(Release{Name: "rel"}, nil, "v1.29.0", nil); err == nil || !strings.Contains(err.Error(), "need .Values.nope") {
		t.Errorf("required: error %v", err)
	}
	delete(chart.Templates, "templates/req.yaml")
	chart.Templates["templates/env.yaml"] = `x: {{ env "HOME" }}`
	if _, _, err := chart.Render(Release{Name: "rel"}, nil, "v1.29.0", nil); err == nil {
		t.Error("env is available; helm removes it")
	}
}

func TestChartMergeValues(t *testing.T) {
	base := map[string]interface{}{"a": map[string]interface{}{"x": 1, "y": 2}, "b": []interface{}{1}, "c": "keep"}
	got := MergeValues(base, map[string]interface{}{"a": map[string]interface{}{"y": 3}, "b": []interface{}{2, 3}, "c": nil})
	if got["a"].(map[string]interface{})["x"] != 1 || got["a"].(map[string]interface{})["y"] != 3 {
		t.Errorf("maps must merge: %v", got["a"])
	}
	if len(got["b"].([]interface{})) != 2 {
		t.Errorf("lists must be replaced: %v", got["b"])
	}
	if _, ok := got["c"]; ok {
		t.Error("a null override must delete the key")
	}
	if base["a"].(map[string]interface{})["y"] != 2 {
		t.Error("MergeValues changed its input")
	}
}
