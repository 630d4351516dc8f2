package action

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/actledger/actledger/internal/duration"
)

// Section is the actions: section of a providers file as it is written,
// by action name. The file's loader decodes it (strictly: an unknown key
// is an error) and converts it with Contracts. Durations are read as
// strings, so that conversion can name the field of a bad value.
type Section map[string]contractYAML

type contractYAML struct {
	Provider     string        `yaml:"provider"`
	Description  string        `yaml:"description"`
	ParamsSchema any           `yaml:"params_schema"`
	Approval     *approvalYAML `yaml:"approval"`
	Key          *string       `yaml:"key"`
}

type approvalYAML struct {
	RequestTTL    *string `yaml:"request_ttl"`
	ApprovalTTL   *string `yaml:"approval_ttl"`
	AutoApprove   string  `yaml:"auto_approve"`
	PolicyVersion string  `yaml:"policy_version"`
}

// Contracts converts the section into contracts, by action name, for
// Compile. A value that cannot be converted is reported, naming the action
// and the field, and left zero.
func (s Section) Contracts() (map[string]Contract, []*FieldError) {
	out := make(map[string]Contract, len(s))
	var errs []*FieldError
	for _, name := range slices.Sorted(maps.Keys(s)) {
		c, bad := s[name].contract(name)
		out[name] = c
		errs = append(errs, bad...)
	}
	return out, errs
}

// contract converts the entry of action name.
func (y contractYAML) contract(name string) (Contract, []*FieldError) {
	c := Contract{Provider: strings.TrimSpace(y.Provider), Description: strings.TrimSpace(y.Description), ParamsSchema: y.ParamsSchema}
	var errs []*FieldError
	if y.Key != nil {
		// A key left empty would fall back to callers' keys silently.
		if c.Key = strings.TrimSpace(*y.Key); c.Key == "" {
			errs = append(errs, &FieldError{Action: name, Field: "key", Err: errors.New("must not be empty (leave it out to key operations by the caller's key)")})
		}
	}
	if y.Approval != nil {
		var approvalErrs []*FieldError
		c.Approval, approvalErrs = y.Approval.policy(name)
		errs = append(errs, approvalErrs...)
	}
	return c, errs
}

// policy converts the approval of action name. A lifetime given must be
// positive: "0s" is never what anyone means.
func (y approvalYAML) policy(name string) (ApprovalPolicy, []*FieldError) {
	var errs []*FieldError
	ttl := func(field string, s *string) time.Duration {
		if s == nil {
			return 0
		}
		d, err := duration.Parse(*s)
		if err == nil && d <= 0 {
			err = errors.New("must be positive (leave it out for the default)")
		}
		if err != nil {
			errs = append(errs, &FieldError{Action: name, Field: field, Err: err})
			return 0
		}
		return d
	}
	p := ApprovalPolicy{
		RequestTTL:    ttl("approval.request_ttl", y.RequestTTL),
		ApprovalTTL:   ttl("approval.approval_ttl", y.ApprovalTTL),
		AutoApprove:   strings.TrimSpace(y.AutoApprove),
		PolicyVersion: strings.TrimSpace(y.PolicyVersion),
	}
	return p, errs
}
