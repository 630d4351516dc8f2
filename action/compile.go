package action

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// FieldError is one problem in an action's contract, naming the action
// and the field (its key path under actions.<name>, e.g.
// "approval.auto_approve"), so that an operator can fix the file without
// guessing.
type FieldError struct {
	// Action is the action's name.
	Action string
	// Field is the YAML key path inside the action.
	Field string
	// Err says what is wrong.
	Err error
}

// Error formats as `action "supplier.create_order": key: must not be empty`.
func (e *FieldError) Error() string {
	return fmt.Sprintf("action %q: %s: %v", e.Action, e.Field, e.Err)
}

// Unwrap exposes the underlying cause (e.g. a CEL compile error).
func (e *FieldError) Unwrap() error { return e.Err }

// Compile validates the contracts of a providers file's actions, keyed by
// action name, fills their defaults and compiles their params schemas and
// expressions, once, so that a contract that cannot work stops the start
// naming the action and the field instead of failing requests later.
// defined reports whether the file defines a provider of that name: a
// contract names the provider that executes the action and knows nothing
// else of it.
//
// Every problem is reported, action by action in the order of their
// names. The contracts returned are copies: later changes to contracts do
// not reach them.
func Compile(contracts map[string]Contract, defined func(provider string) bool) (map[string]*Contract, []*FieldError) {
	out := make(map[string]*Contract, len(contracts))
	var errs []*FieldError
	// tools maps each MCP tool name (the action with "." → "_", as
	// mcp.ToolName makes it) to its action: one tool per action.
	tools := make(map[string]string, len(contracts))
	for _, name := range slices.Sorted(maps.Keys(contracts)) {
		c := contracts[name]
		bad := func(field string, err error) {
			errs = append(errs, &FieldError{Action: name, Field: field, Err: err})
		}
		if err := checkName(name); err != nil {
			bad("name", err)
		}
		tool := strings.ReplaceAll(name, ".", "_")
		if other, ok := tools[tool]; ok {
			bad("name", fmt.Errorf("makes the MCP tool name %s, as action %s does: rename one", tool, other))
		}
		tools[tool] = name
		switch {
		case c.Provider == "":
			bad("provider", errors.New("is required"))
		case !defined(c.Provider):
			bad("provider", fmt.Errorf("%q is not defined under providers", c.Provider))
		}
		c = c.withDefaults()
		c.Name = name
		errs = append(errs, c.compile()...)
		out[name] = &c
	}
	return out, errs
}

// checkName keeps action names usable in logs, query strings and NATS
// subjects (where "*" and ">" are wildcards).
func checkName(name string) error {
	if name == "" {
		return errors.New("must not be empty")
	}
	for _, r := range name {
		if r <= ' ' || r == 0x7f || r == '*' || r == '>' {
			return fmt.Errorf("%q must not contain spaces, control characters, '*' or '>'", name)
		}
	}
	return nil
}
