// A small evaluator for the subset of CEL (the Common Expression Language) that the
// TrainingJob CRD's x-kubernetes-validations rules use.
//
// Why: the API server evaluates those rules with cel-go, which Debian does not package,
// and the rules must be tested against the same spec corpus as the C++ validator. So this
// file parses the rule text as written in the CRD and evaluates it with CEL's semantics
// for that subset, strictly (anything outside the subset is a parse error, never a silent
// "true"):
//   - literals: int, double, 'string' / "string", true, false, null, [lists]
//   - self, field selection (a.b, a['b']), has(a.b), size(x), x.size(), string(x),
//     s.matches(re), s.startsWith(p), s.endsWith(p), s.contains(p), x in list
//   - macros l.all(v, p), l.exists(v, p), l.exists_one(v, p), l.filter(v, p), over a
//     list's items or a map's keys
//   - ! - * / % + - < <= > >= == != && || ?:
//
// Semantics kept from CEL because they decide whether a rule accepts or rejects:
//   - selecting an absent field is an error ("no such key"), which the API server
//     reports as a rejection; rules must guard optional fields with has().
//   - int and double never mix in arithmetic or ordering ("no such overload"); == across
//     numeric types compares values, across other types it is false.
//   - integer overflow, division and modulus by zero are errors.
//   - && and || are commutative over errors: false && error == false, true || error == true.
package deploy

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// celNode is one node of a parsed expression.
type celNode struct {
	kind     string // lit, ident, select, index, call, method, unary, binary, cond, list
	op       string // operator, identifier, field or function name
	value    interface{}
	children []*celNode
}

// CelProgram is a parsed rule.
type CelProgram struct {
	source string
	root   *celNode
}

type celToken struct {
	kind string // ident, int, double, string, op, eof
	text string
	pos  int
}

func celLex(src string) ([]celToken, error) {
	var toks []celToken
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case isIdentStart(c):
			j := i
			for j < len(src) && (isIdentStart(src[j]) || (src[j] >= '0' && src[j] <= '9')) {
				j++
			}
			toks = append(toks, celToken{"ident", src[i:j], i})
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < len(src) && src[j] >= '0' && src[j] <= '9' {
				j++
			}
			kind := "int"
			if j < len(src) && src[j] == '.' && j+1 < len(src) && src[j+1] >= '0' && src[j+1] <= '9' {
				kind = "double"
				j++
				for j < len(src) && src[j] >= '0' && src[j] <= '9' {
					j++
				}
			}
			if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
				kind = "double"
				j++
				if j < len(src) && (src[j] == '+' || src[j] == '-') {
					j++
				}
				for j < len(src) && src[j] >= '0' && src[j] <= '9' {
					j++
				}
			}
			toks = append(toks, celToken{kind, src[i:j], i})
			i = j
		case c == '\'' || c == '"':
			j := i + 1
			var sb strings.Builder
			for ; j < len(src) && src[j] != c; j++ {
				if src[j] == '\\' && j+1 < len(src) {
					j++
					switch src[j] {
					case 'n':
						sb.WriteByte('\n')
					case 't':
						sb.WriteByte('\t')
					default:
						sb.WriteByte(src[j])
					}
					continue
				}
				sb.WriteByte(src[j])
			}
			if j >= len(src) {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			toks = append(toks, celToken{"string", sb.String(), i})
			i = j + 1
		default:
			two := ""
			if i+1 < len(src) {
				two = src[i : i+2]
			}
			switch two {
			case "&&", "||", "==", "!=", "<=", ">=":
				toks = append(toks, celToken{"op", two, i})
				i += 2
				continue
			}
			if strings.IndexByte("!<>+-*/%?:.,()[]", c) >= 0 {
				toks = append(toks, celToken{"op", string(c), i})
				i++
				continue
			}
			return nil, fmt.Errorf("unexpected character %q at %d", c, i)
		}
	}
	return append(toks, celToken{"eof", "", len(src)}), nil
}

func isIdentStart(c byte) bool { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

type celParser struct {
	toks []celToken
	pos  int
}

func (p *celParser) peek() celToken { return p.toks[p.pos] }
func (p *celParser) next() celToken { t := p.toks[p.pos]; p.pos++; return t }
func (p *celParser) accept(op string) bool {
	if t := p.peek(); t.kind == "op" && t.text == op {
		p.pos++
		return true
	}
	return false
}
func (p *celParser) expect(op string) error {
	if !p.accept(op) {
		t := p.peek()
		return fmt.Errorf("expected %q at %d, found %q", op, t.pos, t.text)
	}
	return nil
}

// CompileCel parses a rule; an error means the rule is outside the supported subset or
// is not CEL at all.
func CompileCel(src string) (*CelProgram, error) {
	toks, err := celLex(src)
	if err != nil {
		return nil, err
	}
	p := &celParser{toks: toks}
	root, err := p.expr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != "eof" {
		return nil, fmt.Errorf("unexpected %q at %d", t.text, t.pos)
	}
	return &CelProgram{source: src, root: root}, nil
}

func (p *celParser) expr() (*celNode, error) {
	c, err := p.binary(0)
	if err != nil {
		return nil, err
	}
	if !p.accept("?") {
		return c, nil
	}
	a, err := p.expr()
	if err != nil {
		return nil, err
	}
	if err := p.expect(":"); err != nil {
		return nil, err
	}
	b, err := p.expr()
	if err != nil {
		return nil, err
	}
	return &celNode{kind: "cond", children: []*celNode{c, a, b}}, nil
}

// Binary operator precedence, lowest first, as in the CEL grammar.
var celPrecedence = [][]string{{"||"}, {"&&"}, {"<", "<=", ">", ">=", "==", "!=", "in"}, {"+", "-"}, {"*", "/", "%"}}

func (p *celParser) binary(level int) (*celNode, error) {
	if level == len(celPrecedence) {
		return p.unary()
	}
	left, err := p.binary(level + 1)
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		matched := ""
		for _, op := range celPrecedence[level] {
			if (t.kind == "op" || (t.kind == "ident" && op == "in")) && t.text == op {
				matched = op
			}
		}
		if matched == "" {
			return left, nil
		}
		p.next()
		right, err := p.binary(level + 1)
		if err != nil {
			return nil, err
		}
		left = &celNode{kind: "binary", op: matched, children: []*celNode{left, right}}
	}
}

func (p *celParser) unary() (*celNode, error) {
	if p.accept("!") {
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &celNode{kind: "unary", op: "!", children: []*celNode{x}}, nil
	}
	if p.accept("-") {
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &celNode{kind: "unary", op: "-", children: []*celNode{x}}, nil
	}
	return p.member()
}

func (p *celParser) args() ([]*celNode, error) {
	var out []*celNode
	if p.accept(")") {
		return out, nil
	}
	for {
		a, err := p.expr()
		if err != nil {
			return nil, err
		}
		out = append(out, a)
		if p.accept(")") {
			return out, nil
		}
		if err := p.expect(","); err != nil {
			return nil, err
		}
	}
}

func (p *celParser) member() (*celNode, error) {
	x, err := p.primary()
	if err != nil {
		return nil, err
	}
	for {
		switch {
		case p.accept("."):
			t := p.next()
			if t.kind != "ident" {
				return nil, fmt.Errorf("expected a field name at %d", t.pos)
			}
			if p.accept("(") {
				args, err := p.args()
				if err != nil {
					return nil, err
				}
				x = &celNode{kind: "method", op: t.text, children: append([]*celNode{x}, args...)}
			} else {
				x = &celNode{kind: "select", op: t.text, children: []*celNode{x}}
			}
		case p.accept("["):
			i, err := p.expr()
			if err != nil {
				return nil, err
			}
			if err := p.expect("]"); err != nil {
				return nil, err
			}
			x = &celNode{kind: "index", children: []*celNode{x, i}}
		default:
			return x, nil
		}
	}
}

func (p *celParser) primary() (*celNode, error) {
	t := p.next()
	switch t.kind {
	case "int":
		v, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad int literal %q", t.text)
		}
		return &celNode{kind: "lit", value: v}, nil
	case "double":
		v, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return nil, fmt.Errorf("bad double literal %q", t.text)
		}
		return &celNode{kind: "lit", value: v}, nil
	case "string":
		return &celNode{kind: "lit", value: t.text}, nil
	case "ident":
		switch t.text {
		case "true":
			return &celNode{kind: "lit", value: true}, nil
		case "false":
			return &celNode{kind: "lit", value: false}, nil
		case "null":
			return &celNode{kind: "lit", value: nil}, nil
		}
		if p.accept("(") {
			args, err := p.args()
			if err != nil {
				return nil, err
			}
			switch t.text {
			case "has":
				if len(args) != 1 || args[0].kind != "select" {
					return nil, fmt.Errorf("has() takes one field selection, like has(self.x)")
				}
			case "size", "string":
				if len(args) != 1 {
					return nil, fmt.Errorf("%s() takes one argument", t.text)
				}
			default:
				return nil, fmt.Errorf("function %s() is outside the supported CEL subset", t.text)
			}
			return &celNode{kind: "call", op: t.text, children: args}, nil
		}
		return &celNode{kind: "ident", op: t.text}, nil
	case "op":
		switch t.text {
		case "(":
			x, err := p.expr()
			if err != nil {
				return nil, err
			}
			return x, p.expect(")")
		case "[":
			var items []*celNode
			if !p.accept("]") {
				for {
					x, err := p.expr()
					if err != nil {
						return nil, err
					}
					items = append(items, x)
					if p.accept("]") {
						break
					}
					if err := p.expect(","); err != nil {
						return nil, err
					}
				}
			}
			return &celNode{kind: "list", children: items}, nil
		}
	}
	return nil, fmt.Errorf("unexpected %q at %d", t.text, t.pos)
}

// Eval runs the rule with `self` bound to value (JSON-like: map[string]interface{},
// []interface{}, string, int64, float64, bool, nil). A rule passes only when it
// evaluates to true; an evaluation error is returned as an error.
func (p *CelProgram) Eval(self interface{}) (bool, error) {
	v, err := celEval(p.root, map[string]interface{}{"self": normalizeNumbers(self)})
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("rule evaluated to %T, not bool", v)
	}
	return b, nil
}

// normalizeNumbers turns every Go integer type into int64, the way the API server hands
// JSON integers to CEL.
func normalizeNumbers(v interface{}) interface{} {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case uint64:
		return int64(x)
	case map[string]interface{}:
		out := make(map[string]interface{}, len(x))
		for k, e := range x {
			out[k] = normalizeNumbers(e)
		}
		return out
	case []interface{}:
		out := make([]interface{}, len(x))
		for i, e := range x {
			out[i] = normalizeNumbers(e)
		}
		return out
	}
	return v
}

func celTypeName(v interface{}) string {
	switch v.(type) {
	case int64:
		return "int"
	case float64:
		return "double"
	case string:
		return "string"
	case bool:
		return "bool"
	case nil:
		return "null_type"
	case []interface{}:
		return "list"
	case map[string]interface{}:
		return "map"
	}
	return fmt.Sprintf("%T", v)
}

func noOverload(op string, a, b interface{}) error {
	return fmt.Errorf("no such overload: %s %s %s", celTypeName(a), op, celTypeName(b))
}

func celEval(n *celNode, env map[string]interface{}) (interface{}, error) {
	switch n.kind {
	case "lit":
		return n.value, nil
	case "ident":
		v, ok := env[n.op]
		if !ok {
			return nil, fmt.Errorf("undeclared reference to %q", n.op)
		}
		return v, nil
	case "list":
		out := []interface{}{}
		for _, c := range n.children {
			v, err := celEval(c, env)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case "select":
		obj, err := celEval(n.children[0], env)
		if err != nil {
			return nil, err
		}
		m, ok := obj.(map[string]interface{})
		if !ok {
			return nil, fmt.Errorf("cannot select field %q from %s", n.op, celTypeName(obj))
		}
		v, ok := m[n.op]
		if !ok {
			return nil, fmt.Errorf("no such key: %s", n.op)
		}
		return v, nil
	case "index":
		obj, err := celEval(n.children[0], env)
		if err != nil {
			return nil, err
		}
		idx, err := celEval(n.children[1], env)
		if err != nil {
			return nil, err
		}
		switch o := obj.(type) {
		case map[string]interface{}:
			k, ok := idx.(string)
			if !ok {
				return nil, noOverload("[]", obj, idx)
			}
			v, ok := o[k]
			if !ok {
				return nil, fmt.Errorf("no such key: %s", k)
			}
			return v, nil
		case []interface{}:
			i, ok := idx.(int64)
			if !ok {
				return nil, noOverload("[]", obj, idx)
			}
			if i < 0 || i >= int64(len(o)) {
				return nil, fmt.Errorf("index out of range: %d", i)
			}
			return o[i], nil
		}
		return nil, noOverload("[]", obj, idx)
	case "call":
		if n.op == "has" {
			sel := n.children[0]
			obj, err := celEval(sel.children[0], env)
			if err != nil {
				return nil, err
			}
			m, ok := obj.(map[string]interface{})
			if !ok {
				return nil, fmt.Errorf("has() on %s", celTypeName(obj))
			}
			_, present := m[sel.op]
			return present, nil
		}
		v, err := celEval(n.children[0], env)
		if err != nil {
			return nil, err
		}
		if n.op == "string" {
			return celString(v)
		}
		return celSize(v)
	case "method":
		return celMethod(n, env)
	case "unary":
		v, err := celEval(n.children[0], env)
		if err != nil {
			return nil, err
		}
		if n.op == "!" {
			b, ok := v.(bool)
			if !ok {
				return nil, fmt.Errorf("no such overload: !%s", celTypeName(v))
			}
			return !b, nil
		}
		switch x := v.(type) {
		case int64:
			if x == math.MinInt64 {
				return nil, fmt.Errorf("integer overflow")
			}
			return -x, nil
		case float64:
			return -x, nil
		}
		return nil, fmt.Errorf("no such overload: -%s", celTypeName(v))
	case "cond":
		c, err := celEval(n.children[0], env)
		if err != nil {
			return nil, err
		}
		b, ok := c.(bool)
		if !ok {
			return nil, fmt.Errorf("condition of ?: is %s, not bool", celTypeName(c))
		}
		if b {
			return celEval(n.children[1], env)
		}
		return celEval(n.children[2], env)
	case "binary":
		return celBinary(n, env)
	}
	return nil, fmt.Errorf("internal: unknown node %s", n.kind)
}

// mapKeys: a map's keys in sorted order, as a CEL list.
func mapKeys(m map[string]interface{}) []interface{} {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]interface{}, len(keys))
	for i, k := range keys {
		out[i] = k
	}
	return out
}

func celSize(v interface{}) (interface{}, error) {
	switch x := v.(type) {
	case string:
		return int64(utf8.RuneCountInString(x)), nil
	case []interface{}:
		return int64(len(x)), nil
	case map[string]interface{}:
		return int64(len(x)), nil
	}
	return nil, fmt.Errorf("no such overload: size(%s)", celTypeName(v))
}

func celString(v interface{}) (interface{}, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case bool:
		return strconv.FormatBool(x), nil
	}
	return nil, fmt.Errorf("no such overload: string(%s)", celTypeName(v))
}

func celMethod(n *celNode, env map[string]interface{}) (interface{}, error) {
	recv, err := celEval(n.children[0], env)
	if err != nil {
		return nil, err
	}
	args := n.children[1:]
	switch n.op {
	case "all", "exists", "exists_one", "filter":
		if len(args) != 2 || args[0].kind != "ident" {
			return nil, fmt.Errorf("%s() takes a variable name and a predicate", n.op)
		}
		list, ok := recv.([]interface{})
		if m, isMap := recv.(map[string]interface{}); isMap {
			list, ok = mapKeys(m), true // CEL's macros range over a map's keys
		}
		if !ok {
			return nil, fmt.Errorf("%s() on %s", n.op, celTypeName(recv))
		}
		inner := make(map[string]interface{}, len(env)+1)
		for k, v := range env {
			inner[k] = v
		}
		count := 0
		var firstErr error
		filtered := []interface{}{}
		for _, item := range list {
			inner[args[0].op] = item
			v, err := celEval(args[1], inner)
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			b, ok := v.(bool)
			if !ok {
				return nil, fmt.Errorf("%s() predicate is %s, not bool", n.op, celTypeName(v))
			}
			if b {
				count++
				filtered = append(filtered, item)
			} else if n.op == "all" {
				return false, nil // false absorbs errors, as in CEL
			}
		}
		if n.op == "exists" && count > 0 {
			return true, nil
		}
		if firstErr != nil {
			return nil, firstErr
		}
		switch n.op {
		case "all":
			return true, nil
		case "exists":
			return false, nil
		case "exists_one":
			return count == 1, nil
		}
		return filtered, nil
	case "size":
		if len(args) != 0 {
			return nil, fmt.Errorf("size() takes no arguments as a method")
		}
		return celSize(recv)
	case "matches", "startsWith", "endsWith", "contains":
		if len(args) != 1 {
			return nil, fmt.Errorf("%s() takes one argument", n.op)
		}
		s, ok := recv.(string)
		if !ok {
			return nil, fmt.Errorf("no such overload: %s.%s()", celTypeName(recv), n.op)
		}
		av, err := celEval(args[0], env)
		if err != nil {
			return nil, err
		}
		a, ok := av.(string)
		if !ok {
			return nil, fmt.Errorf("no such overload: string.%s(%s)", n.op, celTypeName(av))
		}
		switch n.op {
		case "matches":
			re, err := regexp.Compile(a) // RE2, as CEL's matches()
			if err != nil {
				return nil, fmt.Errorf("bad regular expression %q: %v", a, err)
			}
			return re.MatchString(s), nil
		case "startsWith":
			return strings.HasPrefix(s, a), nil
		case "endsWith":
			return strings.HasSuffix(s, a), nil
		}
		return strings.Contains(s, a), nil
	}
	return nil, fmt.Errorf("method %s() is outside the supported CEL subset", n.op)
}

func celBinary(n *celNode, env map[string]interface{}) (interface{}, error) {
	if n.op == "&&" || n.op == "||" {
		short := n.op == "||" // the value that decides the result on its own
		a, errA := celEval(n.children[0], env)
		if errA == nil {
			if b, ok := a.(bool); ok && b == short {
				return short, nil
			}
		}
		b, errB := celEval(n.children[1], env)
		if errB == nil {
			if bb, ok := b.(bool); ok && bb == short {
				return short, nil
			}
		}
		if errA != nil {
			return nil, errA
		}
		if errB != nil {
			return nil, errB
		}
		ab, okA := a.(bool)
		bb, okB := b.(bool)
		if !okA || !okB {
			return nil, noOverload(n.op, a, b)
		}
		if short {
			return ab || bb, nil
		}
		return ab && bb, nil
	}
	a, err := celEval(n.children[0], env)
	if err != nil {
		return nil, err
	}
	b, err := celEval(n.children[1], env)
	if err != nil {
		return nil, err
	}
	switch n.op {
	case "==", "!=":
		eq := celEqual(a, b)
		if n.op == "==" {
			return eq, nil
		}
		return !eq, nil
	case "in":
		switch c := b.(type) {
		case []interface{}:
			for _, e := range c {
				if celEqual(a, e) {
					return true, nil
				}
			}
			return false, nil
		case map[string]interface{}:
			k, ok := a.(string)
			if !ok {
				return nil, noOverload("in", a, b)
			}
			_, present := c[k]
			return present, nil
		}
		return nil, noOverload("in", a, b)
	case "<", "<=", ">", ">=":
		cmp, err := celCompare(n.op, a, b)
		if err != nil {
			return nil, err
		}
		switch n.op {
		case "<":
			return cmp < 0, nil
		case "<=":
			return cmp <= 0, nil
		case ">":
			return cmp > 0, nil
		}
		return cmp >= 0, nil
	}
	return celArith(n.op, a, b)
}

func celEqual(a, b interface{}) bool {
	switch x := a.(type) {
	case int64:
		switch y := b.(type) {
		case int64:
			return x == y
		case float64:
			return float64(x) == y
		}
		return false
	case float64:
		switch y := b.(type) {
		case int64:
			return x == float64(y)
		case float64:
			return x == y
		}
		return false
	case []interface{}:
		y, ok := b.([]interface{})
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !celEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]interface{}:
		y, ok := b.(map[string]interface{})
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !celEqual(v, w) {
				return false
			}
		}
		return true
	}
	return a == b
}

func celCompare(op string, a, b interface{}) (int, error) {
	switch x := a.(type) {
	case int64:
		if y, ok := b.(int64); ok {
			switch {
			case x < y:
				return -1, nil
			case x > y:
				return 1, nil
			}
			return 0, nil
		}
	case float64:
		if y, ok := b.(float64); ok {
			switch {
			case x < y:
				return -1, nil
			case x > y:
				return 1, nil
			}
			return 0, nil
		}
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), nil
		}
	}
	return 0, noOverload(op, a, b)
}

func celArith(op string, a, b interface{}) (interface{}, error) {
	switch x := a.(type) {
	case int64:
		y, ok := b.(int64)
		if !ok {
			return nil, noOverload(op, a, b)
		}
		switch op {
		case "+":
			r := x + y
			if (r > x) != (y > 0) {
				return nil, fmt.Errorf("integer overflow")
			}
			return r, nil
		case "-":
			r := x - y
			if (r < x) != (y > 0) {
				return nil, fmt.Errorf("integer overflow")
			}
			return r, nil
		case "*":
			if x != 0 && ((x*y)/x != y || (x == -1 && y == math.MinInt64)) {
				return nil, fmt.Errorf("integer overflow")
			}
			return x * y, nil
		case "/":
			if y == 0 {
				return nil, fmt.Errorf("division by zero")
			}
			return x / y, nil
		case "%":
			if y == 0 {
				return nil, fmt.Errorf("modulus by zero")
			}
			return x % y, nil
		}
	case float64:
		y, ok := b.(float64)
		if !ok {
			return nil, noOverload(op, a, b)
		}
		switch op {
		case "+":
			return x + y, nil
		case "-":
			return x - y, nil
		case "*":
			return x * y, nil
		case "/":
			return x / y, nil
		}
	case string:
		if y, ok := b.(string); ok && op == "+" {
			return x + y, nil
		}
	case []interface{}:
		if y, ok := b.([]interface{}); ok && op == "+" {
			return append(append([]interface{}{}, x...), y...), nil
		}
	}
	return nil, noOverload(op, a, b)
}

// SelfFieldPaths lists every chain of field selections rooted at `self` in the rule
// (e.g. ["grpo","updatesPerStep"]), so a test can check each one names a field the
// schema declares, as the API server's type check does when the CRD is created.
func (p *CelProgram) SelfFieldPaths() [][]string {
	var out [][]string
	var walk func(n *celNode, bound map[string]bool)
	chain := func(n *celNode) ([]string, bool) {
		var names []string
		for n.kind == "select" {
			names = append([]string{n.op}, names...)
			n = n.children[0]
		}
		return names, n.kind == "ident" && n.op == "self"
	}
	walk = func(n *celNode, bound map[string]bool) {
		if n.kind == "select" {
			if names, ok := chain(n); ok {
				out = append(out, names)
				return
			}
		}
		for _, c := range n.children {
			walk(c, bound)
		}
	}
	walk(p.root, nil)
	return out
}
