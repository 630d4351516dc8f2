package stripe

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// parseForm reads a create request's body as application/x-www-form-urlencoded, the only
// request encoding Stripe's API accepts. A body in another encoding is refused rather than read
// as no parameters, so a client that sends JSON finds out at once.
func parseForm(r *http.Request) (url.Values, *refusal) {
	body, _ := io.ReadAll(r.Body) // ServeHTTP has read it already
	if len(body) > 0 {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/x-www-form-urlencoded" {
			return nil, invalid("", "", "Request bodies must be application/x-www-form-urlencoded, got Content-Type "+
				strconv.Quote(r.Header.Get("Content-Type"))+".")
		}
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, invalid("", "", "The request body is not valid form encoding: "+err.Error())
	}
	return form, nil
}

// checkKnown refuses a parameter the endpoint does not take, as Stripe does, so a client that
// spells a nested key wrongly (metadata.reference instead of metadata[reference]) is told. known
// lists plain names; metadata[...] and expand[] are always accepted.
func checkKnown(form url.Values, known ...string) *refusal {
	for name := range form {
		if _, ok := metadataKey(name); ok || name == "expand[]" || strings.HasPrefix(name, "expand[") {
			continue
		}
		ok := false
		for _, k := range known {
			if name == k {
				ok = true
				break
			}
		}
		if !ok {
			return invalid("parameter_unknown", name, "Received unknown parameter: "+name)
		}
	}
	return nil
}

// metadataKey returns K for a parameter named metadata[K]. Stripe keys may not contain square
// brackets.
func metadataKey(name string) (string, bool) {
	inner, ok := strings.CutPrefix(name, "metadata[")
	if !ok {
		return "", false
	}
	k, ok := strings.CutSuffix(inner, "]")
	if !ok || k == "" || strings.ContainsAny(k, "[]") {
		return "", false
	}
	return k, true
}

// metadata collects the metadata[K]=V parameters (the last value of each wins).
func metadata(form url.Values) map[string]string {
	md := make(map[string]string)
	for name, vs := range form {
		if k, ok := metadataKey(name); ok && len(vs) > 0 {
			md[k] = vs[len(vs)-1]
		}
	}
	return md
}

// checkMetadata applies Stripe's limits: 50 keys, names up to 40 characters, values up to 500.
func checkMetadata(md map[string]string) *refusal {
	if len(md) > 50 {
		return invalid("", "metadata", "You can specify up to 50 metadata keys.")
	}
	for k, v := range md {
		if len(k) > 40 {
			return invalid("", "metadata["+k+"]", "Metadata keys can be up to 40 characters long.")
		}
		if len(v) > 500 {
			return invalid("", "metadata["+k+"]", "Metadata values can be up to 500 characters long.")
		}
	}
	return nil
}

// formInt reads a positive integer parameter; required says whether it may be absent.
func formInt(form url.Values, name string, required bool) (int64, bool, *refusal) {
	if !form.Has(name) {
		if required {
			return 0, false, invalid("parameter_missing", name, "Missing required param: "+name+".")
		}
		return 0, false, nil
	}
	n, err := strconv.ParseInt(form.Get(name), 10, 64)
	if err != nil {
		return 0, false, invalid("parameter_invalid_integer", name, "Invalid integer: "+form.Get(name))
	}
	if n <= 0 {
		return 0, false, invalid("parameter_invalid_integer", name, fmt.Sprintf("This value must be greater than or equal to 1 (%s).", name))
	}
	return n, true, nil
}

// formBool reads a boolean parameter written true or false.
func formBool(form url.Values, name string) (bool, *refusal) {
	switch form.Get(name) {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, invalid("", name, "Invalid boolean: "+form.Get(name))
}

// optional returns a pointer to the parameter's value, nil when absent or empty (JSON null).
func optional(form url.Values, name string) *string {
	if v := form.Get(name); v != "" {
		return &v
	}
	return nil
}
