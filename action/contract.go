package action

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/actledger/actledger/internal/celexpr"
)

// Defaults and bounds of an action's contract.
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

// Contract is an action's contract (yaml "actions.<name>"): which provider
// executes it, what it does, which params it accepts and who may approve it.
// The short form {provider: acme} is a Contract with only Provider set: any
// JSON object is accepted, and every proposal waits for a person.
type Contract struct {
	// Name is the action's name, the key of its entry in the file.
	Name string
	// Provider is the provider's name (yaml "provider").
	Provider string
	// Description says what the action does, for an agent's tool list and
	// the console (yaml "description").
	Description string
	// ParamsSchema is a JSON Schema 2020-12 document (yaml "params_schema",
	// decoded as JSON values); nil accepts any JSON object. It is compiled
	// once, by Compile.
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
	RequestTTL time.Duration
	// ApprovalTTL is how long a granted approval stays valid for dispatch
	// (yaml "approval_ttl"); default 1h. An approver may give another.
	ApprovalTTL time.Duration
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
func (c *Contract) CheckParams(params []byte) error {
	if c == nil || c.schema == nil {
		return nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return &ParamsError{Action: c.Name, Message: "not JSON: " + err.Error()}
	}
	err = c.schema.Validate(doc)
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
	return &ParamsError{Action: c.Name, Path: path, Message: msg}
}

// PolicyApprover is the approver recorded on an approval granted by the
// action's auto_approve policy.
func (c *Contract) PolicyApprover() string {
	return "policy:" + c.Approval.PolicyVersion
}

// HasPolicy reports whether proposals of the action may be approved by its
// auto_approve policy.
func (c *Contract) HasPolicy() bool { return c != nil && c.policy != nil }

// AutoApprove evaluates the action's auto_approve policy for params (a
// JSON object) of tenant. It returns false, nil when there is no policy. An
// error (a missing field, a wrong type, the cost limit) comes back with
// false: the caller leaves the proposal to a person and logs why.
func (c *Contract) AutoApprove(ctx context.Context, params []byte, tenant string) (bool, error) {
	if !c.HasPolicy() {
		return false, nil
	}
	var values map[string]any
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	if err := dec.Decode(&values); err != nil {
		return false, fmt.Errorf("auto_approve of %s: params: %w", c.Name, err)
	}
	out, _, err := c.policy.ContextEval(ctx, map[string]any{
		"params": celexpr.FromJSON(values), "tenant": tenant, "action": c.Name,
	})
	if err != nil {
		return false, fmt.Errorf("auto_approve of %s: %w", c.Name, err)
	}
	approved, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("auto_approve of %s: result %v is not a bool", c.Name, out.Value())
	}
	return approved, nil
}

// withDefaults fills the approval contract's defaults.
func (c Contract) withDefaults() Contract {
	c.Approval.RequestTTL = cmp.Or(c.Approval.RequestTTL, DefaultRequestTTL)
	c.Approval.ApprovalTTL = cmp.Or(c.Approval.ApprovalTTL, DefaultApprovalTTL)
	if c.Approval.PolicyVersion == "" && c.Approval.AutoApprove == "" {
		c.Approval.PolicyVersion = DefaultPolicyVersion
	}
	return c
}

// compile checks and compiles the contract's schema, key and policy, once,
// so a bad contract stops the start naming the action instead of failing
// requests later.
func (c *Contract) compile() []*FieldError {
	var errs []*FieldError
	bad := func(field string, err error) {
		errs = append(errs, &FieldError{Action: c.Name, Field: field, Err: err})
	}
	if c.ParamsSchema != nil {
		if err := c.compileSchema(); err != nil {
			bad("params_schema", err)
		}
	}
	if c.Approval.RequestTTL < 0 {
		bad("approval.request_ttl", errors.New("must not be negative"))
	}
	if c.Approval.ApprovalTTL < 0 {
		bad("approval.approval_ttl", errors.New("must not be negative"))
	}
	if c.Key != "" {
		if k, err := compileBusinessKey(c.Key); err != nil {
			bad("key", err)
		} else {
			c.key = k
		}
	}
	if c.Approval.AutoApprove != "" {
		if c.Approval.PolicyVersion == "" {
			bad("approval.policy_version", errors.New("is required with auto_approve: every approval by the policy records it"))
		}
		if err := c.compilePolicy(); err != nil {
			bad("approval.auto_approve", err)
		}
	}
	return errs
}

// compileSchema compiles ParamsSchema.
func (c *Contract) compileSchema() error {
	// Round-trip through JSON so the compiler sees JSON values whatever
	// decoded the file (YAML gives ints and nested any maps).
	raw, err := json.Marshal(c.ParamsSchema)
	if err != nil {
		return fmt.Errorf("is not JSON-compatible: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	compiler := jsonschema.NewCompiler()
	compiler.DefaultDraft(jsonschema.Draft2020)
	// The compiler keys resources by their normalised URL (an empty
	// authority, "///"): given another spelling, a local $ref
	// ("#/$defs/…") misses the schema and is fetched instead.
	url := "actledger:///actions/" + c.Name + "/params_schema.json"
	if err := compiler.AddResource(url, doc); err != nil {
		return err
	}
	c.schema, err = compiler.Compile(url)
	return err
}

// compilePolicy compiles Approval.AutoApprove, which must type-check as a
// bool expression.
func (c *Contract) compilePolicy() error {
	env := envs().policy
	ast, err := celexpr.Compile(env, c.Approval.AutoApprove)
	if err != nil {
		return err
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return fmt.Errorf("must be a bool expression, is %s", ast.OutputType())
	}
	prg, err := celexpr.Program(env, ast, PolicyCostLimit)
	if err != nil {
		return err
	}
	c.policy = prg
	return nil
}
