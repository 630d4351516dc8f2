package action

import (
	"sync"

	"cel.dev/cel-go/cel"

	"github.com/actledger/actledger/internal/celexpr"
)

// The CEL environments of an action's contract, one per kind of
// expression: what each may read is fixed here, and every expression is
// compiled and type-checked against its environment when the file loads.
// Neither reads anything of a supplier.
type contractEnvs struct {
	// policy: an action's auto_approve, over params, tenant and action.
	policy *cel.Env
	// key: an action's business key, over params and the tenant, nothing
	// that changes between two requests of one intention.
	key *cel.Env
}

var envs = sync.OnceValue(func() contractEnvs {
	params := cel.Variable("params", cel.MapType(cel.StringType, cel.DynType))
	tenant := cel.Variable("tenant", cel.StringType)
	return contractEnvs{
		policy: celexpr.NewEnv(params, tenant, cel.Variable("action", cel.StringType)),
		key:    celexpr.NewEnv(params, tenant),
	}
})
