package deploy

import (
	"strings"
	"testing"
)

// The CEL subset must behave as cel-go does on the cases the CRD rules depend on:
// absent fields are errors, errors are absorbed by && / ||, ints and doubles do not mix.
func TestCelEvaluatesLikeCel(t *testing.T) {
	self := map[string]interface{}{
		"workers": int64(2), "maxWorkers": int64(8), "rate": 0.5, "name": "job-a",
		"actions": []interface{}{"restart", "reshard"},
		"grpo":    map[string]interface{}{"promptsPerStep": int64(32), "updatesPerStep": int64(3)},
	}
	cases := []struct {
		rule    string
		want    bool
		wantErr string
	}{
		{"self.workers <= self.maxWorkers", true, ""},
		{"self.workers > self.maxWorkers", false, ""},
		{"self.grpo.promptsPerStep % self.grpo.updatesPerStep == 0", false, ""},
		{"(self.grpo.promptsPerStep / self.grpo.updatesPerStep) % self.workers == 0", true, ""}, // 32/3 == 10 (integer division)
		{"has(self.missing)", false, ""},
		{"!has(self.missing) || self.missing > 0", true, ""},
		{"self.missing > 0", false, "no such key"},
		{"self.missing > 0 || true", true, ""},
		{"false && self.missing > 0", false, ""},
		{"self.missing > 0 && false", false, ""},
		{"self.missing > 0 && true", false, "no such key"},
		{"self.rate > 0", false, "no such overload"},
		{"self.rate > 0.0", true, ""},
		{"self.workers == 2.0", true, ""},
		{"self.name == 2", false, ""},
		{"self.workers / 0 == 1", false, "division by zero"},
		{"self.workers % 0 == 1", false, "modulus by zero"},
		{"9223372036854775807 + self.workers > 0", false, "overflow"},
		{"self.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')", true, ""},
		{"self.name.matches('^[0-9]+$')", false, ""},
		{"size(self.name) == 5 && self.name.size() == 5", true, ""},
		{"size(self.name) + size(string(self.maxWorkers - 1)) == 6", true, ""},
		{"self.actions.all(a, self.actions.filter(b, b == a).size() == 1)", true, ""},
		{"self.actions.exists(a, a == 'reshard') && !('enableOffload' in self.actions)", true, ""},
		{"self.actions.exists_one(a, a.startsWith('re'))", false, ""},
		{"self.workers > 1 ? self.name.endsWith('-a') : false", true, ""},
		{"-self.workers < 0 && 'x' + 'y' == 'xy'", true, ""},
		{"self['grpo']['updatesPerStep'] == 3", true, ""},
	}
	for _, c := range cases {
		prog, err := CompileCel(c.rule)
		if err != nil {
			t.Errorf("%s: compile: %v", c.rule, err)
			continue
		}
		got, err := prog.Eval(self)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: error %v, want one containing %q", c.rule, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.rule, err)
		} else if got != c.want {
			t.Errorf("%s = %v, want %v", c.rule, got, c.want)
		}
	}
}

// Anything outside the subset must fail to compile rather than be guessed at.
func TestCelRefusesWhatItDoesNotImplement(t *testing.T) {
	for _, rule := range []string{
		"self.x.isSorted()", "quantity(self.memory).isGreaterThan(quantity('1Gi'))",
		"self.x ==", "has(self)", "self.x @ 1", "'unterminated",
	} {
		prog, err := CompileCel(rule)
		if err == nil {
			// Method names are resolved at evaluation, like CEL's runtime dispatch.
			if _, err = prog.Eval(map[string]interface{}{"x": []interface{}{}}); err == nil {
				t.Errorf("%q was accepted", rule)
			}
		}
	}
}

func TestCelSelfFieldPaths(t *testing.T) {
	prog, err := CompileCel("self.a.b > 0 && has(self.c) && self.l.all(x, x.y == self.d)")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range prog.SelfFieldPaths() {
		got = append(got, strings.Join(p, "."))
	}
	want := "a.b c l d"
	if strings.Join(got, " ") != want {
		t.Errorf("paths %v, want %s", got, want)
	}
}
