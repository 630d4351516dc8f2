package celexpr

import (
	"context"
	"reflect"
	"testing"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
)

// A JSON value read for CEL and given back keeps its integers integers,
// however large, and its fractions fractions.
func TestParseJSONThenNativeKeepsIntegersIntegers(t *testing.T) {
	t.Parallel()
	env := NewEnv(cel.Variable("v", cel.DynType))
	for _, tc := range []struct {
		raw  string
		want any
	}{
		{`9007199254740993`, int64(9007199254740993)},
		{`37.0`, float64(37)},
		{`37.5`, 37.5},
		{`{"a":[1,"x",null,true]}`, map[string]any{"a": []any{int64(1), "x", nil, true}}},
	} {
		v, ok := ParseJSON([]byte(tc.raw))
		if !ok {
			t.Fatalf("ParseJSON(%s) refused", tc.raw)
		}
		ast, err := Compile(env, "v")
		if err != nil {
			t.Fatal(err)
		}
		prg, err := Program(env, ast, 100)
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := prg.ContextEval(context.Background(), map[string]any{"v": v})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := Native(out); err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %#v, %v; want %#v", tc.raw, got, err, tc.want)
		}
	}
	for _, raw := range []string{``, `{`, `1 2`} {
		if _, ok := ParseJSON([]byte(raw)); ok {
			t.Errorf("ParseJSON(%q) accepted what is not one JSON value", raw)
		}
	}
}

// An expression whose type is known at load must be of a kind asked for;
// one whose type is known only when it runs is checked then.
func TestFitsTakesTheKindsAskedForAndDyn(t *testing.T) {
	t.Parallel()
	env := NewEnv(cel.Variable("params", cel.MapType(cel.StringType, cel.DynType)))
	for _, tc := range []struct {
		src  string
		want bool
	}{
		{`"po-" + string(params.po)`, true},
		{`params.po`, true},
		{`params.po + 1 > 2`, false},
		{`1`, false},
	} {
		ast, err := Compile(env, tc.src)
		if err != nil {
			t.Fatal(err)
		}
		if got := Fits(ast.OutputType(), types.StringKind); got != tc.want {
			t.Errorf("Fits(%s, string) = %v, want %v", tc.src, got, tc.want)
		}
	}
	if _, err := Compile(env, `params.po +`); err == nil {
		t.Error("Compile accepted an expression that does not parse")
	}
}
