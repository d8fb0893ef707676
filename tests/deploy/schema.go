// A validator for the structural OpenAPI v3 schema subset the TrainingJob CRD uses, with
// the API server's order of work: default, then validate the structure, then (when no
// value has the wrong type) evaluate the x-kubernetes-validations CEL rules.
//
// Supported keywords: type (object, array, string, integer, number, boolean),
// x-kubernetes-int-or-string, properties, required, items, enum, minimum/maximum with
// exclusiveMinimum/exclusiveMaximum (OpenAPI v3.0 booleans), minLength/maxLength, pattern,
// maxItems/minItems, x-kubernetes-list-type set (no duplicates), default, format
// (date-time), x-kubernetes-validations (rule, message, fieldPath), additionalProperties
// (a map's values; rules on the map itself), x-kubernetes-preserve-unknown-fields (an
// object passed on as written: its unknown fields are kept, not rejected).
// Any other keyword in the schema is refused by CheckSupported, so the test never
// passes by ignoring a constraint it does not know.
//
// Unknown fields are errors: the API server prunes them, but `kubectl apply` and
// `kubectl create` (>= 1.27) reject them by server-side field validation (Strict), and
// `headroom validate` rejects them too. metadata is not validated here beyond what the
// root CEL rules say about metadata.name (the API server owns ObjectMeta).
package deploy

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// FieldError is one rejection: the path in the "spec.grpo.groupSize" form
// `headroom validate` prints, and what is wrong.
type FieldError struct {
	Path    string
	Message string
	// TypeError marks a wrong type; the API server skips CEL rules when one is present.
	TypeError bool
}

func (e FieldError) String() string { return e.Path + ": " + e.Message }

// Schema wraps one node of an openAPIV3Schema as decoded from YAML.
type Schema map[string]interface{}

var supportedKeywords = map[string]bool{
	"type": true, "description": true, "properties": true, "required": true, "items": true,
	"enum": true, "minimum": true, "maximum": true, "exclusiveMinimum": true,
	"exclusiveMaximum": true, "minLength": true, "maxLength": true, "pattern": true,
	"maxItems": true, "minItems": true, "default": true, "format": true,
	"x-kubernetes-int-or-string": true, "x-kubernetes-list-type": true,
	"x-kubernetes-list-map-keys": true, "x-kubernetes-validations": true,
	"additionalProperties": true, "x-kubernetes-preserve-unknown-fields": true,
}

// CheckSupported returns one message per schema keyword this validator does not
// implement, and per node that is not structural (no type, no int-or-string) or has no
// description (`kubectl explain` shows it).
func CheckSupported(s Schema, path string) []string {
	var out []string
	for k := range s {
		if !supportedKeywords[k] {
			out = append(out, fmt.Sprintf("%s: keyword %q is not supported by the test validator", path, k))
		}
	}
	if _, ok := s["type"]; !ok && s["x-kubernetes-int-or-string"] != true {
		out = append(out, fmt.Sprintf("%s: no type (not structural)", path))
	}
	if d, _ := s["description"].(string); strings.TrimSpace(d) == "" {
		out = append(out, fmt.Sprintf("%s: no description", path))
	}
	// An object the schema says nothing about is emptied by the API server's pruning; the
	// root's metadata is the one the API server owns itself.
	if s["type"] == "object" && len(s.props()) == 0 && s.additional() == nil &&
		s["x-kubernetes-preserve-unknown-fields"] != true && path != "metadata" {
		out = append(out, fmt.Sprintf("%s: an object without properties, additionalProperties or x-kubernetes-preserve-unknown-fields: the API server prunes its contents", path))
	}
	for name, p := range s.props() {
		out = append(out, CheckSupported(p, joinPath(path, name))...)
	}
	if it := s.items(); it != nil {
		out = append(out, CheckSupported(it, path+"[]")...)
	}
	if ap := s.additional(); ap != nil {
		out = append(out, CheckSupported(ap, path+"[*]")...)
	}
	for _, r := range s.rules() {
		if _, err := CompileCel(r.Rule); err != nil {
			out = append(out, fmt.Sprintf("%s: rule %q: %v", path, r.Rule, err))
		}
	}
	return out
}

func (s Schema) props() map[string]Schema {
	raw, _ := s["properties"].(map[string]interface{})
	out := make(map[string]Schema, len(raw))
	for k, v := range raw {
		if m, ok := v.(map[string]interface{}); ok {
			out[k] = Schema(m)
		}
	}
	return out
}

// additional is the schema of a map's values (additionalProperties), nil when none.
func (s Schema) additional() Schema {
	if m, ok := s["additionalProperties"].(map[string]interface{}); ok {
		return Schema(m)
	}
	return nil
}

func (s Schema) items() Schema {
	if m, ok := s["items"].(map[string]interface{}); ok {
		return Schema(m)
	}
	return nil
}

// Rule is one x-kubernetes-validations entry.
type Rule struct {
	Rule, Message, FieldPath string
}

func (s Schema) rules() []Rule {
	raw, _ := s["x-kubernetes-validations"].([]interface{})
	var out []Rule
	for _, r := range raw {
		m, _ := r.(map[string]interface{})
		rule, _ := m["rule"].(string)
		msg, _ := m["message"].(string)
		fp, _ := m["fieldPath"].(string)
		out = append(out, Rule{rule, msg, fp})
	}
	return out
}

func joinPath(base, name string) string {
	if base == "" {
		return name
	}
	return base + "." + name
}

// ApplyDefaults fills absent properties from their defaults, top-down, as the API server
// does when it decodes an object (a defaulted object is then defaulted inside too).
func ApplyDefaults(s Schema, v interface{}) interface{} {
	switch x := v.(type) {
	case map[string]interface{}:
		props := s.props()
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, name := range names {
			p := props[name]
			if _, present := x[name]; !present {
				if d, ok := p["default"]; ok {
					x[name] = deepCopy(d)
				}
			}
			if cur, present := x[name]; present {
				x[name] = ApplyDefaults(p, cur)
			}
		}
		return x
	case []interface{}:
		if it := s.items(); it != nil {
			for i := range x {
				x[i] = ApplyDefaults(it, x[i])
			}
		}
	}
	return v
}

func deepCopy(v interface{}) interface{} {
	switch x := v.(type) {
	case map[string]interface{}:
		out := make(map[string]interface{}, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []interface{}:
		out := make([]interface{}, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// Validate checks v (already defaulted) against s. skipped lists the metadata-like
// subtrees that are not validated structurally.
func Validate(s Schema, v interface{}, path string) []FieldError {
	errs := validateStructure(s, v, path)
	for _, e := range errs {
		if e.TypeError {
			return errs
		}
	}
	return append(errs, validateRules(s, v, path)...)
}

func typeErr(path string, want string, v interface{}) FieldError {
	return FieldError{Path: path, Message: fmt.Sprintf("must be of type %s, got %s", want, jsonTypeName(v)), TypeError: true}
}

func jsonTypeName(v interface{}) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case int, int64, int32, uint64:
		return "integer"
	case float64:
		return "number"
	case []interface{}:
		return "array"
	case map[string]interface{}:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func asInt(v interface{}) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), true
		}
	}
	return 0, false
}

func asNumber(v interface{}) (float64, bool) {
	if i, ok := asInt(v); ok {
		return float64(i), true
	}
	f, ok := v.(float64)
	return f, ok
}

func validateStructure(s Schema, v interface{}, path string) []FieldError {
	var errs []FieldError
	if v == nil {
		return []FieldError{{Path: path, Message: "must not be null", TypeError: true}}
	}
	typ, _ := s["type"].(string)
	if s["x-kubernetes-int-or-string"] == true {
		if _, isInt := asInt(v); !isInt {
			if _, isStr := v.(string); !isStr {
				return []FieldError{typeErr(path, "integer or string", v)}
			}
		}
	} else {
		switch typ {
		case "object":
			if _, ok := v.(map[string]interface{}); !ok {
				return []FieldError{typeErr(path, "object", v)}
			}
		case "array":
			if _, ok := v.([]interface{}); !ok {
				return []FieldError{typeErr(path, "array", v)}
			}
		case "string":
			if _, ok := v.(string); !ok {
				return []FieldError{typeErr(path, "string", v)}
			}
		case "integer":
			if _, ok := asInt(v); !ok {
				return []FieldError{typeErr(path, "integer", v)}
			}
		case "number":
			if _, ok := asNumber(v); !ok {
				return []FieldError{typeErr(path, "number", v)}
			}
		case "boolean":
			if _, ok := v.(bool); !ok {
				return []FieldError{typeErr(path, "boolean", v)}
			}
		}
	}

	if enum, ok := s["enum"].([]interface{}); ok {
		found := false
		for _, e := range enum {
			if reflect.DeepEqual(normalizeNumbers(e), normalizeNumbers(v)) {
				found = true
			}
		}
		if !found {
			var names []string
			for _, e := range enum {
				names = append(names, fmt.Sprintf("%q", fmt.Sprint(e)))
			}
			errs = append(errs, FieldError{Path: path, Message: fmt.Sprintf("unsupported value %q: supported values: %s", fmt.Sprint(v), strings.Join(names, ", "))})
		}
	}

	if n, ok := asNumber(v); ok {
		if min, ok := asNumber(s["minimum"]); ok {
			if s["exclusiveMinimum"] == true && n <= min {
				errs = append(errs, FieldError{Path: path, Message: fmt.Sprintf("should be greater than %v", min)})
			} else if n < min {
				errs = append(errs, FieldError{Path: path, Message: fmt.Sprintf("should be greater than or equal to %v", min)})
			}
		}
		if max, ok := asNumber(s["maximum"]); ok {
			if s["exclusiveMaximum"] == true && n >= max {
				errs = append(errs, FieldError{Path: path, Message: fmt.Sprintf("should be less than %v", max)})
			} else if n > max {
				errs = append(errs, FieldError{Path: path, Message: fmt.Sprintf("should be less than or equal to %v", max)})
			}
		}
	}

	if str, ok := v.(string); ok {
		n := int64(utf8.RuneCountInString(str))
		if min, ok := asInt(s["minLength"]); ok && n < min {
			errs = append(errs, FieldError{Path: path, Message: fmt.Sprintf("should be at least %d chars long", min)})
		}
		if max, ok := asInt(s["maxLength"]); ok && n > max {
			errs = append(errs, FieldError{Path: path, Message: fmt.Sprintf("may not be more than %d bytes", max)})
		}
		if pat, ok := s["pattern"].(string); ok {
			re, err := regexp.Compile(pat)
			if err != nil {
				errs = append(errs, FieldError{Path: path, Message: fmt.Sprintf("schema pattern %q does not compile: %v", pat, err)})
			} else if !re.MatchString(str) {
				errs = append(errs, FieldError{Path: path, Message: fmt.Sprintf("should match '%s'", pat)})
			}
		}
		if s["format"] == "date-time" {
			if _, err := time.Parse(time.RFC3339, str); err != nil {
				errs = append(errs, FieldError{Path: path, Message: "must be an RFC 3339 date-time"})
			}
		}
	}

	switch x := v.(type) {
	case map[string]interface{}:
		props := s.props()
		if req, ok := s["required"].([]interface{}); ok {
			for _, r := range req {
				if _, present := x[r.(string)]; !present {
					errs = append(errs, FieldError{Path: joinPath(path, r.(string)), Message: "Required value"})
				}
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p, known := props[k]
			switch {
			case !known && s.additional() != nil:
				// A map entry's path, as the API server writes it: labels[app.example.com/x].
				errs = append(errs, validateStructure(s.additional(), x[k], fmt.Sprintf("%s[%s]", path, k))...)
			case !known && s["x-kubernetes-preserve-unknown-fields"] == true:
				// Passed on as written (a Kubernetes sub-object the operator does not read).
			case !known && len(props) == 0 && typ == "object":
				// An object without properties (metadata): the API server owns it.
			case !known:
				errs = append(errs, FieldError{Path: joinPath(path, k), Message: "unknown field (rejected by strict field validation)"})
			default:
				errs = append(errs, validateStructure(p, x[k], joinPath(path, k))...)
			}
		}
	case []interface{}:
		if max, ok := asInt(s["maxItems"]); ok && int64(len(x)) > max {
			errs = append(errs, FieldError{Path: path, Message: fmt.Sprintf("must have at most %d items", max)})
		}
		if min, ok := asInt(s["minItems"]); ok && int64(len(x)) < min {
			errs = append(errs, FieldError{Path: path, Message: fmt.Sprintf("must have at least %d items", min)})
		}
		if s["x-kubernetes-list-type"] == "set" {
			for i := range x {
				for j := 0; j < i; j++ {
					if reflect.DeepEqual(normalizeNumbers(x[i]), normalizeNumbers(x[j])) {
						errs = append(errs, FieldError{Path: fmt.Sprintf("%s[%d]", path, i), Message: fmt.Sprintf("Duplicate value: %v", x[i])})
					}
				}
			}
		}
		if it := s.items(); it != nil {
			for i, e := range x {
				errs = append(errs, validateStructure(it, e, fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	}
	return errs
}

// validateRules evaluates the CEL rules of every node that is present, deepest last.
func validateRules(s Schema, v interface{}, path string) []FieldError {
	var errs []FieldError
	for _, r := range s.rules() {
		prog, err := CompileCel(r.Rule)
		if err != nil {
			errs = append(errs, FieldError{Path: path, Message: fmt.Sprintf("rule %q does not compile: %v", r.Rule, err)})
			continue
		}
		at := path
		if r.FieldPath != "" {
			at = path + r.FieldPath
			if path == "" {
				at = strings.TrimPrefix(r.FieldPath, ".")
			}
		}
		ok, err := prog.Eval(v)
		switch {
		case err != nil:
			errs = append(errs, FieldError{Path: at, Message: fmt.Sprintf("rule %q: evaluation error: %v", r.Rule, err)})
		case !ok:
			msg := r.Message
			if msg == "" {
				msg = "failed rule: " + r.Rule
			}
			errs = append(errs, FieldError{Path: at, Message: msg})
		}
	}
	switch x := v.(type) {
	case map[string]interface{}:
		props := s.props()
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if p, ok := props[k]; ok {
				errs = append(errs, validateRules(p, x[k], joinPath(path, k))...)
			}
		}
	case []interface{}:
		if it := s.items(); it != nil {
			for i, e := range x {
				errs = append(errs, validateRules(it, e, fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	}
	return errs
}
