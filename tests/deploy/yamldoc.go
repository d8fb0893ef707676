// YAML documents decoded the way kubectl sends them: JSON-like values (maps with string
// keys, []interface{}, string, int64, float64, bool, nil), integral numbers as int64.
package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"

	"gopkg.in/yaml.v3"
)

// DecodeYAMLDocuments splits a multi-document stream; empty documents are dropped.
func DecodeYAMLDocuments(text []byte) ([]map[string]interface{}, error) {
	dec := yaml.NewDecoder(bytes.NewReader(text))
	var out []map[string]interface{}
	for i := 1; ; i++ {
		var v interface{}
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("document %d: %v", i, err)
		}
		if v == nil {
			continue
		}
		m, ok := jsonLike(v).(map[string]interface{})
		if !ok {
			return out, fmt.Errorf("document %d is a %T, not a mapping", i, v)
		}
		out = append(out, m)
	}
}

// DecodeYAMLFile reads a file holding exactly one document.
func DecodeYAMLFile(path string) (map[string]interface{}, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	docs, err := DecodeYAMLDocuments(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(docs) != 1 {
		return nil, fmt.Errorf("%s: %d documents, want 1", path, len(docs))
	}
	return docs[0], nil
}

func jsonLike(v interface{}) interface{} {
	switch x := v.(type) {
	case map[string]interface{}:
		for k, e := range x {
			x[k] = jsonLike(e)
		}
		return x
	case map[interface{}]interface{}:
		out := make(map[string]interface{}, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = jsonLike(e)
		}
		return out
	case []interface{}:
		for i, e := range x {
			x[i] = jsonLike(e)
		}
		return x
	case int:
		return int64(x)
	case uint64:
		return float64(x)
	case float64:
		// kubectl sends YAML as JSON, where 2.0 is written 2, and the API server decodes an
		// integral JSON number as an integer: so do we.
		if x == math.Trunc(x) && math.Abs(x) < 9.0e18 {
			return int64(x)
		}
	}
	return v
}

// SourceDir is the repository root (this file lives in tests/deploy), unless
// HEADROOM_SOURCE_DIR says otherwise.
func SourceDir() string {
	if d := os.Getenv("HEADROOM_SOURCE_DIR"); d != "" {
		return d
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// SourcePath joins parts onto the repository root.
func SourcePath(parts ...string) string {
	return filepath.Join(append([]string{SourceDir()}, parts...)...)
}
