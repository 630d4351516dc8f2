// Package celexpr holds what every CEL expression of the providers file shares, whichever
// package owns it (an action's auto_approve and business key, a supplier's body, answer and
// webhook expressions): how an environment is built, how an expression is type-checked and
// bounded, and how JSON values are turned into what CEL reads and back.
//
// What each kind of expression may read is decided by the package that owns it, next to the
// code that evaluates it; this package never declares a variable. It never evaluates an
// expression either: it only builds the means to.
package celexpr

import (
	"fmt"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/ext"
)

// NewEnv is the environment of one kind of expression, reading the variables vars declare.
// JSON has one number type, so 10 and 10.0 compare equal; the strings extension (indexOf,
// substring, split, trim, lowerAscii, …) reads references out of text a supplier echoes and
// normalises the text a business key is made of.
//
// The environments are fixed in code: failing to build one is a bug, and NewEnv panics.
func NewEnv(vars ...cel.EnvOption) *cel.Env {
	env, err := cel.NewEnv(append(vars, cel.CrossTypeNumericComparisons(true), ext.Strings())...)
	if err != nil {
		panic(fmt.Sprintf("celexpr: CEL environment: %v", err))
	}
	return env
}

// Compile parses and type-checks src in env. The error says, for the file's author, that it
// does not compile and why.
func Compile(env *cel.Env, src string) (*cel.Ast, error) {
	ast, iss := env.Compile(src)
	if iss.Err() != nil {
		return nil, fmt.Errorf("does not compile: %w", iss.Err())
	}
	return ast, nil
}

// Fits reports whether an expression of type t can give a value of one of kinds: t is one of
// them, or dyn (a bare params.x, a field of an answer), whose value is known only when it runs
// and is checked then.
func Fits(t *cel.Type, kinds ...types.Kind) bool {
	ok := t.Kind() == types.DynKind || t.Kind() == types.AnyKind
	for _, k := range kinds {
		ok = ok || t.Kind() == k
	}
	return ok
}

// Program is the program of a checked expression, bounded to costLimit (CEL's cost units,
// roughly one per operation and per element visited) so that no input can stall its caller:
// an evaluation that runs over is an error. A cancelled context stops it too.
func Program(env *cel.Env, ast *cel.Ast, costLimit uint64) (cel.Program, error) {
	return env.Program(ast, cel.CostLimit(costLimit), cel.InterruptCheckFrequency(100))
}
