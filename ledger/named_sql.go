package ledger

import (
	"context"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"
)

// namedSQL is a statement written with @name parameters (as
// pgx.StrictNamedArgs reads them), rewritten to positional ones once, when
// the package loads, by pgx's own rewrite. pgx.StrictNamedArgs would parse
// the statement on every call, operationTransition's several times per
// operation on the hot path (docs/benchmarks.md, "Measurements the code's
// comments point to"); a call of args costs a map lookup per argument
// instead, and refuses a missing or extra argument in the same way.
type namedSQL struct {
	// SQL is the statement with $1…$n placeholders.
	SQL string
	// names are the parameters' names, in placeholder order.
	names []string
}

// namedParam finds the candidates for parameter names (pgx's own pattern);
// pgx's rewrite then decides which are parameters: it skips quoted text and
// comments.
var namedParam = regexp.MustCompile(`@([A-Za-z_][A-Za-z0-9_]*)`)

// mustNamed rewrites sql once. It panics on a statement pgx cannot
// rewrite, which every test that loads the package would report.
func mustNamed(sql string) namedSQL {
	self := make(map[string]any)
	for _, m := range namedParam.FindAllStringSubmatch(sql, -1) {
		self[m[1]] = m[1]
	}
	positional, ordered, err := pgx.NamedArgs(self).RewriteQuery(context.Background(), nil, sql, nil)
	if err != nil {
		panic(fmt.Sprintf("ledger: named statement: %v\n%s", err, sql))
	}
	n := namedSQL{SQL: positional, names: make([]string, len(ordered))}
	for i, a := range ordered {
		name, ok := a.(string)
		if !ok {
			panic(fmt.Sprintf("ledger: named statement: parameter $%d has no name the pattern found\n%s", i+1, sql))
		}
		n.names[i] = name
	}
	return n
}

// args returns the positional arguments for named, in placeholder order.
// Like pgx.StrictNamedArgs it refuses an argument the statement does not
// name and a name without an argument.
func (n namedSQL) args(named pgx.StrictNamedArgs) ([]any, error) {
	if len(named) != len(n.names) {
		return nil, fmt.Errorf("ledger: statement takes %d named arguments %v, got %d", len(n.names), n.names, len(named))
	}
	out := make([]any, len(n.names))
	for i, name := range n.names {
		v, ok := named[name]
		if !ok {
			return nil, fmt.Errorf("ledger: argument %s found in the statement but not given", name)
		}
		out[i] = v
	}
	return out, nil
}
