package provider

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
)

// Auth is how a supplier authenticates actledger's calls: exactly one of
// BearerEnv, Basic and Header. The file names environment variables, never
// values; each must be set, and not empty, when the registry is built.
type Auth struct {
	// BearerEnv names the variable whose value is sent as
	// "Authorization: Bearer <value>" (yaml "bearer_env").
	BearerEnv string
	// Basic sends "Authorization: Basic base64(user:password)" (yaml
	// "basic").
	Basic *BasicAuth
	// Header sends the value in a header of the supplier's choosing
	// (yaml "header"), e.g. X-Postmark-Server-Token.
	Header *HeaderAuth
}

// BasicAuth names the variables of an HTTP Basic credential.
type BasicAuth struct {
	// UsernameEnv and PasswordEnv name the variables (yaml
	// "username_env", "password_env").
	UsernameEnv, PasswordEnv string
}

// HeaderAuth names a credential header and the variable of its value.
type HeaderAuth struct {
	// Name is the header's name (yaml "name").
	Name string
	// ValueEnv names the variable holding its value (yaml "value_env").
	ValueEnv string
}

// credential is a resolved Auth: the header it sets. Its value is secret:
// it is written to a request and nowhere else. A Config holds it by
// pointer, so printing a Config (%+v) shows an address, never the value.
type credential struct {
	header, value string
}

// Masked stands for a credential's value wherever a request is shown
// (`actledger providers check --render`).
const Masked = "***"

// set writes the credential to h; a nil credential (no auth) writes
// nothing.
func (c *credential) set(h http.Header) {
	if c != nil {
		h.Set(c.header, c.value)
	}
}

// resolve reads the variables of a and returns the credential, or one
// error per variable that is missing, each naming its field and variable.
func (a *Auth) resolve(getenv func(string) string) (*credential, []fieldProblem) {
	if a == nil {
		return nil, nil
	}
	var problems []fieldProblem
	read := func(field, name string) string {
		switch {
		case name == "":
			problems = append(problems, fieldProblem{field, fmt.Errorf("is required")})
		case !envNamePattern.MatchString(name):
			problems = append(problems, fieldProblem{field, fmt.Errorf("%q is not an environment variable name (give the variable's name, never the credential)", name)})
		default:
			if v := getenv(name); strings.TrimSpace(v) != "" {
				return v
			}
			problems = append(problems, fieldProblem{field, fmt.Errorf("environment variable %s is not set or is empty", name)})
		}
		return ""
	}
	given := 0
	for _, set := range []bool{a.BearerEnv != "", a.Basic != nil, a.Header != nil} {
		if set {
			given++
		}
	}
	if given != 1 {
		return nil, []fieldProblem{{"auth", fmt.Errorf("must give exactly one of bearer_env, basic and header, got %d", given)}}
	}
	var c credential
	switch {
	case a.BearerEnv != "":
		c = credential{"Authorization", "Bearer " + read("auth.bearer_env", a.BearerEnv)}
	case a.Basic != nil:
		user := read("auth.basic.username_env", a.Basic.UsernameEnv)
		password := read("auth.basic.password_env", a.Basic.PasswordEnv)
		c = credential{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))}
	default:
		switch {
		case a.Header.Name == "":
			problems = append(problems, fieldProblem{"auth.header.name", fmt.Errorf("is required")})
		case !headerNamePattern.MatchString(a.Header.Name):
			problems = append(problems, fieldProblem{"auth.header.name", fmt.Errorf("%q is not a valid HTTP header name", a.Header.Name)})
		}
		c = credential{http.CanonicalHeaderKey(a.Header.Name), read("auth.header.value_env", a.Header.ValueEnv)}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return &c, nil
}

// fieldProblem is a FieldError before its provider is known.
type fieldProblem struct {
	field string
	err   error
}
