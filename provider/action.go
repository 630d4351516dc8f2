package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/actledger/actledger/internal/celexpr"
	"github.com/actledger/actledger/internal/display"
)

// Defaults of an action's approval contract.
const (
	// DefaultRequestTTL is how long a proposal may wait for a decision when
	// the action sets no approval.request_ttl; after it the proposal is held.
	DefaultRequestTTL = 24 * time.Hour
	// DefaultApprovalTTL is how long an approval granted to a proposal stays
	// valid for dispatch when neither the approver nor the action says.
	DefaultApprovalTTL = time.Hour
	// DefaultPolicyVersion is recorded on approvals of an action that names
	// no policy_version, when the approver names none either.
	DefaultPolicyVersion = "unversioned"
	// PolicyCostLimit bounds the work of one auto_approve evaluation (CEL's
	// cost units, roughly one per operation and per element visited), so a
	// policy over large params can never stall a request; an evaluation
	// that runs over is an error, and an error never approves.
	PolicyCostLimit = 10_000
	// MaxKeyLength bounds an operation's key, in characters: a caller's
	// key and a business key alike, since either becomes the key.
	MaxKeyLength = 256
)

// Action is an action's contract (yaml "actions.<name>"): which provider
// executes it, what it does, which params it accepts and who may approve it.
// The short form {provider: acme} is an Action with only Provider set: any
// JSON object is accepted, and every proposal waits for a person.
type Action struct {
	// Name is the action's name, the key of its entry in the file.
	Name string
	// Provider is the provider's name (yaml "provider").
	Provider string
	// Description says what the action does, for an agent's tool list and
	// the console (yaml "description").
	Description string
	// ParamsSchema is a JSON Schema 2020-12 document (yaml "params_schema",
	// decoded as JSON values); nil accepts any JSON object. It is compiled
	// once, when the registry is built.
	ParamsSchema any
	// Approval is how proposals of this action are decided (yaml "approval").
	Approval ApprovalPolicy
	// Key is the action's business key (yaml "key"): a CEL expression
	// over params (a map) and tenant (a string) that gives a non-empty
	// string, the identity of the business operation (one purchase order,
	// one support case). Declared, it is the operation's key whatever the
	// caller sends, so a re-planning agent that invents a new key for the
	// same intention gets the same operation; the caller's key is kept
	// only as the operation's client key. Empty: the caller's key (or the
	// approval's id) is the operation's key, as before business keys.
	Key string

	schema *jsonschema.Schema
	policy cel.Program
	key    *businessKey
}

// ApprovalPolicy is the approval part of an action's contract.
type ApprovalPolicy struct {
	// RequestTTL is how long a proposal may wait for a decision (yaml
	// "request_ttl"); default 24h. A proposal past it is held.
	RequestTTL Duration
	// ApprovalTTL is how long a granted approval stays valid for dispatch
	// (yaml "approval_ttl"); default 1h. An approver may give another.
	ApprovalTTL Duration
	// AutoApprove is a CEL expression over params (a map), tenant and action
	// (strings) that must be a bool (yaml "auto_approve"). True approves a
	// proposal at once, by "policy:<PolicyVersion>"; false, or any error
	// while evaluating it, leaves the proposal to a person. Empty: every
	// proposal waits for a person.
	AutoApprove string
	// PolicyVersion is recorded on every approval of this action, by a
	// person or the policy (yaml "policy_version"); required with
	// AutoApprove.
	PolicyVersion string
}

// ParamsError says which part of the params broke the action's schema:
// Path is a JSON Pointer into the params ("/qty"; "" is the whole object).
type ParamsError struct {
	Action  string
	Path    string
	Message string
}

func (e *ParamsError) Error() string {
	path := e.Path
	if path == "" {
		path = "/"
	}
	return fmt.Sprintf("params%s: %s", strings.TrimSuffix(path, "/"), e.Message)
}

// CheckParams validates params (a JSON object) against the action's
// schema. It returns a *ParamsError naming the first failing field, or nil
// when the params fit (or the action has no schema).
func (a *Action) CheckParams(params []byte) error {
	if a == nil || a.schema == nil {
		return nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return &ParamsError{Action: a.Name, Message: "not JSON: " + err.Error()}
	}
	err = a.schema.Validate(doc)
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return err
	}
	path, msg := "", verr.Error()
	// The basic output lists every failing keyword; the deepest instance
	// location names the field most precisely.
	for _, unit := range verr.BasicOutput().Errors {
		if unit.Error != nil && len(unit.InstanceLocation) >= len(path) {
			path, msg = unit.InstanceLocation, unit.Error.String()
		}
	}
	return &ParamsError{Action: a.Name, Path: path, Message: msg}
}

// PolicyApprover is the approver recorded on an approval granted by the
// action's auto_approve policy.
func (a *Action) PolicyApprover() string {
	return "policy:" + a.Approval.PolicyVersion
}

// HasPolicy reports whether proposals of the action may be approved by its
// auto_approve policy.
func (a *Action) HasPolicy() bool { return a != nil && a.policy != nil }

// AutoApprove evaluates the action's auto_approve policy for params (a
// JSON object) of tenant. It returns false, nil when there is no policy. An
// error (a missing field, a wrong type, the cost limit) comes back with
// false: the caller leaves the proposal to a person and logs why.
func (a *Action) AutoApprove(ctx context.Context, params []byte, tenant string) (bool, error) {
	if !a.HasPolicy() {
		return false, nil
	}
	var values map[string]any
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	if err := dec.Decode(&values); err != nil {
		return false, fmt.Errorf("auto_approve of %s: params: %w", a.Name, err)
	}
	out, _, err := a.policy.ContextEval(ctx, map[string]any{
		"params": celexpr.FromJSON(values), "tenant": tenant, "action": a.Name,
	})
	if err != nil {
		return false, fmt.Errorf("auto_approve of %s: %w", a.Name, err)
	}
	approved, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("auto_approve of %s: result %v is not a bool", a.Name, out.Value())
	}
	return approved, nil
}

// withDefaults fills the approval contract's defaults.
func (a Action) withDefaults() Action {
	a.Approval.RequestTTL = orDuration(a.Approval.RequestTTL, DefaultRequestTTL)
	a.Approval.ApprovalTTL = orDuration(a.Approval.ApprovalTTL, DefaultApprovalTTL)
	if a.Approval.PolicyVersion == "" && a.Approval.AutoApprove == "" {
		a.Approval.PolicyVersion = DefaultPolicyVersion
	}
	return a
}

// compile checks and compiles the action's schema and policy, once, so a
// bad contract stops the start naming the action instead of failing
// requests later.
func (a *Action) compile(env *cel.Env) []*FieldError {
	var errs []*FieldError
	bad := func(field string, err error) {
		errs = append(errs, &FieldError{Action: a.Name, Field: field, Err: err})
	}
	if a.ParamsSchema != nil {
		// Round-trip through JSON so the compiler sees JSON values whatever
		// decoded the file (YAML gives ints and nested any maps).
		raw, err := json.Marshal(a.ParamsSchema)
		if err != nil {
			bad("params_schema", fmt.Errorf("is not JSON-compatible: %w", err))
		} else if doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw)); err != nil {
			bad("params_schema", err)
		} else {
			c := jsonschema.NewCompiler()
			c.DefaultDraft(jsonschema.Draft2020)
			// The compiler keys resources by their normalised URL (an
			// empty authority, "///"): given another spelling, a local
			// $ref ("#/$defs/…") misses the schema and is fetched instead.
			url := "actledger:///actions/" + a.Name + "/params_schema.json"
			if err := c.AddResource(url, doc); err != nil {
				bad("params_schema", err)
			} else if a.schema, err = c.Compile(url); err != nil {
				bad("params_schema", err)
			}
		}
	}
	if a.Approval.RequestTTL.Duration < 0 {
		bad("approval.request_ttl", errors.New("must not be negative"))
	}
	if a.Approval.ApprovalTTL.Duration < 0 {
		bad("approval.approval_ttl", errors.New("must not be negative"))
	}
	if a.Key != "" {
		if k, err := compileBusinessKey(a.Key); err != nil {
			bad("key", err)
		} else {
			a.key = k
		}
	}
	if a.Approval.AutoApprove != "" {
		if a.Approval.PolicyVersion == "" {
			bad("approval.policy_version", errors.New("is required with auto_approve: every approval by the policy records it"))
		}
		ast, err := celexpr.Compile(env, a.Approval.AutoApprove)
		switch {
		case err != nil:
			bad("approval.auto_approve", err)
		case !ast.OutputType().IsExactType(cel.BoolType):
			bad("approval.auto_approve", fmt.Errorf("must be a bool expression, is %s", ast.OutputType()))
		default:
			prg, err := celexpr.Program(env, ast, PolicyCostLimit)
			if err != nil {
				bad("approval.auto_approve", err)
			} else {
				a.policy = prg
			}
		}
	}
	return errs
}

// HasBusinessKey reports whether the action declares a business key, so
// the server, not the caller, decides which operation a request is.
func (a *Action) HasBusinessKey() bool { return a != nil && a.key != nil }

// OperationKey decides the key of an operation of the action requested
// with params by tenant, where callerKey is the key the caller sent ("" for
// none). With a business key declared, the key is the derived one and the
// caller's key is only kept, as clientKey, for tracing; without one, the
// caller's key is the key (the ledger keys an operation without one by its
// approval) and clientKey is "". This is the one place that rule is
// written: every path that creates an operation asks it.
//
// The error is a *ParamsError when params give no key.
func (a *Action) OperationKey(ctx context.Context, params []byte, tenant, callerKey string) (key, clientKey string, err error) {
	derived, ok, err := a.BusinessKey(ctx, params, tenant)
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
// longer than MaxKeyLength, the cost limit) come back as a *ParamsError
// naming, where it can tell, the param the expression could not read.
func (a *Action) BusinessKey(ctx context.Context, params []byte, tenant string) (key string, ok bool, err error) {
	if !a.HasBusinessKey() {
		return "", false, nil
	}
	refuse := func(path []string, format string, args ...any) (string, bool, error) {
		return "", true, &ParamsError{Action: a.Name, Path: jsonPointer(path), Message: fmt.Sprintf(format, args...)}
	}
	var values map[string]any
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	if err := dec.Decode(&values); err != nil || values == nil {
		return refuse(nil, "the action's business key needs params that are a JSON object")
	}
	values = keyValue(values).(map[string]any)
	out, _, err := a.key.prg.ContextEval(ctx, map[string]any{"params": values, "tenant": tenant})
	if err != nil {
		if ctx.Err() != nil {
			return "", true, fmt.Errorf("business key of %s: %w", a.Name, ctx.Err())
		}
		switch path, missing := a.key.unreadable(values, err); {
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
		return refuse(a.key.onlyPath(), "the action's business key must be a string; these params make it %s %v", out.Type().TypeName(), out.Value())
	case s == "":
		return refuse(a.key.onlyPath(), "the action's business key must not be empty; these params make it empty")
	case utf8.RuneCountInString(s) > MaxKeyLength:
		return refuse(a.key.onlyPath(), "the action's business key must be at most %d characters; these params make it %d", MaxKeyLength, utf8.RuneCountInString(s))
	case strings.ContainsRune(s, 0):
		return refuse(a.key.onlyPath(), "the action's business key must not contain U+0000")
	}
	// A key names an operation to people and to other agents, who tell
	// keys apart by eye: a derived one is visible text, as a caller's is.
	for i, r := range []rune(s) {
		if display.Hidden(r) {
			return refuse(a.key.onlyPath(), "the action's business key must be visible text; these params put %U, a control, format or invisible character, at its character %d", r, i+1)
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
