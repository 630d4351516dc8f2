package provider

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"

	"github.com/actledger/actledger/internal/celexpr"
)

// ExprCostLimit bounds the work of one evaluation of a providers-file
// expression (CEL's cost units, roughly one per operation and per element
// visited). A body built from large params, or a lookup answer with many
// records, can never stall a worker: an evaluation that runs over is an
// error, handled as that expression's failure.
const ExprCostLimit = 100_000

// The CEL environments of a supplier's expressions, one per kind: what
// each may read is fixed here, in one place for every supplier, and every
// expression is compiled and type-checked against its environment when the
// file loads. (An action's auto_approve and business key have theirs in
// package action.)
type exprEnvs struct {
	// body: create.body, over the operation's params and its key.
	body *cel.Env
	// answer: create.reference, lookup.matches and outcomes[].when, over a
	// supplier's answer.
	answer *cel.Env
	// match: lookup.reference, over one element of lookup.matches.
	match *cel.Env
	// webhook: webhook.*, over a webhook's parsed body and its headers.
	webhook *cel.Env
	// listing: reconcile.list.records and next, over a page's answer (as
	// answer), the window it lists (since, until: timestamps) and cursor,
	// the params list.next gave for this page (empty on the first): what
	// a supplier that pages by offset or page number counts on from, and
	// what a list that cannot be bounded by the window (GitHub's issues,
	// filtered by their update time) is filtered by.
	listing *cel.Env
	// record: reconcile.list.reference, provider_reference and created,
	// over one listed record.
	record *cel.Env
	// compare: reconcile.match, over one listed record and the params of
	// the operation it names.
	compare *cel.Env
}

var envs = sync.OnceValue(func() exprEnvs {
	headers := cel.Variable("headers", cel.MapType(cel.StringType, cel.StringType))
	params := cel.Variable("params", cel.MapType(cel.StringType, cel.DynType))
	return exprEnvs{
		body: celexpr.NewEnv(
			params,
			cel.Variable("reference", cel.StringType),
			cel.Variable("account", cel.StringType),
			cel.Variable("environment", cel.StringType),
		),
		answer: celexpr.NewEnv(cel.Variable("response", cel.DynType), cel.Variable("status", cel.IntType), headers),
		listing: celexpr.NewEnv(cel.Variable("response", cel.DynType), cel.Variable("status", cel.IntType), headers,
			cel.Variable("since", cel.TimestampType), cel.Variable("until", cel.TimestampType),
			cel.Variable("cursor", cel.MapType(cel.StringType, cel.DynType))),
		match:   celexpr.NewEnv(cel.Variable("match", cel.DynType)),
		webhook: celexpr.NewEnv(cel.Variable("body", cel.DynType), headers),
		record:  celexpr.NewEnv(cel.Variable("record", cel.DynType)),
		compare: celexpr.NewEnv(cel.Variable("record", cel.DynType), params),
	}
})

// result kinds an expression may be checked for at load; an expression
// whose type is only known at run time (dyn) passes and is checked when it
// runs.
var (
	kindsMap    = []types.Kind{types.MapKind}
	kindsList   = []types.Kind{types.ListKind}
	kindsBool   = []types.Kind{types.BoolKind}
	kindsString = []types.Kind{types.StringKind}
	kindsID     = []types.Kind{types.StringKind, types.IntKind, types.UintKind}
)

// expr is one compiled expression of the providers file.
type expr struct {
	src string
	prg cel.Program
	// usesReference: the expression reads the variable reference (the
	// operation's external key).
	usesReference bool
}

// compileExpr compiles src in env and checks that its type is one of
// kinds (or dyn). The error says what is wrong in words for the file's
// author.
func compileExpr(env *cel.Env, src string, what string, kinds []types.Kind) (*expr, error) {
	ast, err := celexpr.Compile(env, src)
	if err != nil {
		return nil, err
	}
	if out := ast.OutputType(); !celexpr.Fits(out, kinds...) {
		return nil, fmt.Errorf("must be %s, is %s", what, out)
	}
	prg, err := celexpr.Program(env, ast, ExprCostLimit)
	if err != nil {
		return nil, err
	}
	e := &expr{src: src, prg: prg}
	for _, r := range ast.NativeRep().ReferenceMap() {
		if r.Name == "reference" && r.Value == nil {
			e.usesReference = true
		}
	}
	return e, nil
}

// eval runs the expression over vars.
func (e *expr) eval(ctx context.Context, vars map[string]any) (ref.Val, error) {
	out, _, err := e.prg.ContextEval(ctx, vars)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// evalNative runs the expression and returns its value as plain Go values
// (map[string]any, []any, string, int64, uint64, float64, bool, nil).
func (e *expr) evalNative(ctx context.Context, vars map[string]any) (any, error) {
	out, err := e.eval(ctx, vars)
	if err != nil {
		return nil, err
	}
	return celexpr.Native(out)
}

// evalBool runs a condition. Anything but a bool is an error.
func (e *expr) evalBool(ctx context.Context, vars map[string]any) (bool, error) {
	out, err := e.eval(ctx, vars)
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("is %s, not a bool", out.Type().TypeName())
	}
	return b, nil
}

// evalID runs an expression that names something (a reference, an event
// id): a non-empty string, or an integer written in decimal.
func (e *expr) evalID(ctx context.Context, vars map[string]any) (string, error) {
	v, err := e.evalNative(ctx, vars)
	if err != nil {
		return "", err
	}
	return idText(v)
}

// idText is v as an identifier: suppliers use strings and integers for ids.
func idText(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return textID(v)
	case int64:
		return strconv.FormatInt(v, 10), nil
	case uint64:
		return strconv.FormatUint(v, 10), nil
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return strconv.FormatInt(int64(v), 10), nil
		}
		return "", fmt.Errorf("is the number %v, not an id", v)
	case nil:
		return "", errors.New("is null")
	}
	return "", fmt.Errorf("is a %T, not a string or an integer", v)
}

// textID checks a supplier's id given as text: Postgres stores neither
// U+0000 nor bytes that are not UTF-8, and an id that cannot be stored
// cannot name the effect (the success is kept, for a person to name).
func textID(s string) (string, error) {
	switch {
	case s == "":
		return "", errors.New("is an empty string")
	case strings.ContainsRune(s, 0):
		return "", errors.New("holds U+0000, which cannot be stored")
	case !utf8.ValidString(s):
		return "", errors.New("is not UTF-8, which cannot be stored")
	case len(s) > maxIDLength:
		return "", fmt.Errorf("is longer than %d bytes", maxIDLength)
	}
	return s, nil
}

// maxIDLength bounds a supplier's id as the API bounds references.
const maxIDLength = 1024

// headerValues is an answer's or a webhook's headers as expressions read
// them: lower-case names, repeated fields joined with ", " (RFC 9110 §5.3).
func headerValues(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for name, values := range h {
		out[strings.ToLower(name)] = strings.Join(values, ", ")
	}
	return out
}
