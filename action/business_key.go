package action

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"

	"github.com/actledger/actledger/internal/celexpr"
	"github.com/actledger/actledger/internal/display"
	"github.com/actledger/actledger/internal/request"
)

// HasBusinessKey reports whether the action declares a business key, so
// the server, not the caller, decides which operation a request is.
func (c *Contract) HasBusinessKey() bool { return c != nil && c.key != nil }

// OperationKey decides the key of an operation of the action requested
// with params by tenant, where callerKey is the key the caller sent ("" for
// none). With a business key declared, the key is the derived one and the
// caller's key is only kept, as clientKey, for tracing; without one, the
// caller's key is the key (the ledger keys an operation without one by its
// approval) and clientKey is "". This is the one place that rule is
// written: every path that creates an operation asks it.
//
// The error is a *ParamsError when params give no key.
func (c *Contract) OperationKey(ctx context.Context, params []byte, tenant, callerKey string) (key, clientKey string, err error) {
	derived, ok, err := c.BusinessKey(ctx, params, tenant)
	switch {
	case err != nil:
		return "", "", err
	case !ok:
		return callerKey, "", nil
	}
	return derived, callerKey, nil
}

// BusinessKey evaluates the action's business key over params (a JSON
// object) of tenant; ok is false when the action declares none. Numbers
// are read as values, as the params fingerprint reads them: 37 and 37.0
// give the same key. Params that give no key (a field the expression reads
// is missing or of another type, the result is not a string, is empty or
// longer than request.MaxKeyLength, the cost limit) come back as a *ParamsError
// naming, where it can tell, the param the expression could not read.
func (c *Contract) BusinessKey(ctx context.Context, params []byte, tenant string) (key string, ok bool, err error) {
	if !c.HasBusinessKey() {
		return "", false, nil
	}
	refuse := func(path []string, format string, args ...any) (string, bool, error) {
		return "", true, &ParamsError{Action: c.Name, Path: jsonPointer(path), Message: fmt.Sprintf(format, args...)}
	}
	var values map[string]any
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	if err := dec.Decode(&values); err != nil || values == nil {
		return refuse(nil, "the action's business key needs params that are a JSON object")
	}
	values = keyValue(values).(map[string]any)
	out, _, err := c.key.prg.ContextEval(ctx, map[string]any{"params": values, "tenant": tenant})
	if err != nil {
		if ctx.Err() != nil {
			return "", true, fmt.Errorf("business key of %s: %w", c.Name, ctx.Err())
		}
		switch path, missing := c.key.unreadable(values, err); {
		case missing:
			return refuse(path, "is missing, and the action's business key is made from it (%v)", err)
		case path != nil:
			return refuse(path, "the action's business key cannot be made from it: %v", err)
		default:
			return refuse(nil, "the action's business key cannot be made from them: %v", err)
		}
	}
	s, isString := out.Value().(string)
	switch {
	case !isString:
		return refuse(c.key.onlyPath(), "the action's business key must be a string; these params make it %s %v", out.Type().TypeName(), out.Value())
	case s == "":
		return refuse(c.key.onlyPath(), "the action's business key must not be empty; these params make it empty")
	case utf8.RuneCountInString(s) > request.MaxKeyLength:
		return refuse(c.key.onlyPath(), "the action's business key must be at most %d characters; these params make it %d", request.MaxKeyLength, utf8.RuneCountInString(s))
	case strings.ContainsRune(s, 0):
		return refuse(c.key.onlyPath(), "the action's business key must not contain U+0000")
	}
	// A key names an operation to people and to other agents, who tell
	// keys apart by eye: a derived one is visible text, as a caller's is.
	for i, r := range []rune(s) {
		if display.Hidden(r) {
			return refuse(c.key.onlyPath(), "the action's business key must be visible text; these params put %U, a control, format or invisible character, at its character %d", r, i+1)
		}
	}
	return s, true, nil
}

// businessKey is a compiled business key and the params it reads.
type businessKey struct {
	prg cel.Program
	// paths are the params the expression reads (params.a.b is
	// ["a", "b"]), in the order they appear, so an error that says only
	// "no such key: b" can name the param it means.
	paths [][]string
}

// compileBusinessKey compiles and type-checks src: its type must be a
// string, or dyn (a bare params.x), which is checked when it runs. Its
// evaluation is cost-limited like the auto_approve policy's, since it runs
// on every request of the action.
func compileBusinessKey(src string) (*businessKey, error) {
	env := envs().key
	ast, err := celexpr.Compile(env, src)
	if err != nil {
		return nil, err
	}
	if out := ast.OutputType(); !celexpr.Fits(out, types.StringKind) {
		return nil, fmt.Errorf("must be a string expression, is %s (string(...) turns a number into one)", out)
	}
	prg, err := celexpr.Program(env, ast, PolicyCostLimit)
	if err != nil {
		return nil, err
	}
	return &businessKey{prg: prg, paths: paramPaths(ast.NativeRep().Expr())}, nil
}

// paramPaths lists the params an expression reads by name: params.a,
// params.a.b, params["a"] (has() tests are left out: they read nothing
// that could be missing).
func paramPaths(e celast.Expr) [][]string {
	var path func(e celast.Expr) ([]string, bool)
	path = func(e celast.Expr) ([]string, bool) {
		switch e.Kind() {
		case celast.IdentKind:
			return nil, e.AsIdent() == "params"
		case celast.SelectKind:
			sel := e.AsSelect()
			if sel.IsTestOnly() {
				return nil, false
			}
			p, ok := path(sel.Operand())
			return append(p[:len(p):len(p)], sel.FieldName()), ok
		case celast.CallKind:
			call := e.AsCall()
			if call.FunctionName() != operators.Index || len(call.Args()) != 2 || call.Args()[1].Kind() != celast.LiteralKind {
				return nil, false
			}
			field, isString := call.Args()[1].AsLiteral().Value().(string)
			p, ok := path(call.Args()[0])
			return append(p[:len(p):len(p)], field), ok && isString
		}
		return nil, false
	}
	var all [][]string
	seen := map[string]bool{}
	celast.PreOrderVisit(e, celast.NewExprVisitor(func(e celast.Expr) {
		if p, ok := path(e); ok && len(p) > 0 && !seen[jsonPointer(p)] {
			seen[jsonPointer(p)] = true
			all = append(all, p)
		}
	}))
	// params.a is read on the way to params.a.b: only the whole path is a
	// param the expression reads.
	var paths [][]string
	for _, p := range all {
		within := false
		for _, q := range all {
			within = within || (len(q) > len(p) && slices.Equal(q[:len(p)], p))
		}
		if !within {
			paths = append(paths, p)
		}
	}
	return paths
}

// unreadable names the param an evaluation error is about: for CEL's "no
// such key: x", the param it reads that params lack (the one named x when
// there is one; missing true); else the one param it reads, if it reads
// one.
func (k *businessKey) unreadable(values map[string]any, err error) (path []string, missing bool) {
	name, named := strings.CutPrefix(err.Error(), "no such key: ")
	if !named {
		// Another error (a type, the cost limit): a param that is
		// missing may be one the expression tests for and does without.
		return k.onlyPath(), false
	}
	var first []string
	for _, p := range k.paths {
		lacking := missingPrefix(values, p)
		if lacking == nil {
			continue
		}
		if lacking[len(lacking)-1] == name {
			return lacking, true
		}
		if first == nil {
			first = lacking
		}
	}
	if first != nil {
		return first, true
	}
	return k.onlyPath(), false
}

// onlyPath is the one param the expression reads, or nil when it reads
// none or several.
func (k *businessKey) onlyPath() []string {
	if len(k.paths) != 1 {
		return nil
	}
	return k.paths[0]
}

// missingPrefix is the shortest prefix of path that values lack (a
// missing field, or a field inside something that is not an object), or
// nil when values hold the whole path.
func missingPrefix(values map[string]any, path []string) []string {
	var cur any = values
	for i, field := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return path[:i+1]
		}
		if cur, ok = m[field]; !ok {
			return path[:i+1]
		}
	}
	return nil
}

// jsonPointer spells a params path as ParamsError.Path does ("/a/b").
func jsonPointer(path []string) string {
	var b strings.Builder
	for _, field := range path {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(field))
	}
	return b.String()
}

// keyValue turns json.Numbers into the values a business key reads:
// int64 for every integral value an int64 holds (37 and 37.0 alike, as
// the canonical params spell both 37), float64 otherwise.
func keyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = keyValue(e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = keyValue(e)
		}
		return v
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n
		}
		f, _ := v.Float64()
		if f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64 {
			return int64(f)
		}
		return f
	}
	return v
}
