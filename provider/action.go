package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"github.com/santhosh-tekuri/jsonschema/v6"
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

	schema *jsonschema.Schema
	policy cel.Program
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
		"params": celValue(values), "tenant": tenant, "action": a.Name,
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

// policyEnv is the CEL environment of every auto_approve expression.
func policyEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("params", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("tenant", cel.StringType),
		cel.Variable("action", cel.StringType),
		// JSON has one number type: 10 and 10.0 must compare equal.
		cel.CrossTypeNumericComparisons(true),
	)
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
	if a.Approval.AutoApprove != "" {
		if a.Approval.PolicyVersion == "" {
			bad("approval.policy_version", errors.New("is required with auto_approve: every approval by the policy records it"))
		}
		ast, iss := env.Compile(a.Approval.AutoApprove)
		switch {
		case iss.Err() != nil:
			bad("approval.auto_approve", fmt.Errorf("does not compile: %w", iss.Err()))
		case !ast.OutputType().IsExactType(cel.BoolType):
			bad("approval.auto_approve", fmt.Errorf("must be a bool expression, is %s", ast.OutputType()))
		default:
			prg, err := env.Program(ast, cel.CostLimit(PolicyCostLimit), cel.InterruptCheckFrequency(100))
			if err != nil {
				bad("approval.auto_approve", err)
			} else {
				a.policy = prg
			}
		}
	}
	return errs
}
