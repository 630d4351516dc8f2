package provider

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/actledger/actledger/internal/celexpr"
)

// Request is a create request as it is sent: what [HTTP.Create] puts on
// the wire, and what `actledger providers check --render` prints.
type Request struct {
	Method string
	URL    string
	Header http.Header
	Body   []byte
}

// ErrBuildRequest is wrapped by the errors of a create request that
// cannot be built for an operation's params (a body expression fails on
// them, a path names a param they lack): nothing is sent, and the
// operation goes to review provider_config_error.
var ErrBuildRequest = errors.New("create request cannot be built")

// RenderCreate builds the create request the provider would send for an
// operation with externalKey and params, its credential masked: what a
// person checks before trusting a providers file.
func (c *Config) RenderCreate(ctx context.Context, externalKey string, params json.RawMessage) (*Request, error) {
	r, err := c.createRequest(ctx, CreateRequest{ExternalKey: externalKey, Params: params})
	if err != nil {
		return nil, err
	}
	if c.credential != nil {
		r.Header.Set(c.credential.header, Masked)
	}
	return r, nil
}

// createRequest builds the create request for req, credential included.
func (c *Config) createRequest(ctx context.Context, req CreateRequest) (*Request, error) {
	params, err := paramsObject(req.Params)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBuildRequest, err)
	}
	path, err := expandPath(c.Create.Path, req.ExternalKey, params)
	if err != nil {
		return nil, fmt.Errorf("%w: create.path: %w", ErrBuildRequest, err)
	}
	var body map[string]any
	if p := c.compiled.body; p != nil {
		v, err := p.evalNative(ctx, map[string]any{
			"params": params, "reference": req.ExternalKey, "account": c.Account, "environment": c.Environment,
		})
		if err != nil {
			return nil, fmt.Errorf("%w: create.body: %w", ErrBuildRequest, err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w: create.body: is a %T, not a map", ErrBuildRequest, v)
		}
		body = m
	} else {
		body = params
		body[cmp.Or(c.ReferenceParam, DefaultReferenceParam)] = req.ExternalKey
	}
	r := &Request{Method: cmp.Or(c.Create.Method, DefaultMethod), URL: joinURL(c.BaseURL, path), Header: http.Header{}}
	switch c.Create.Encoding {
	case EncodingForm:
		r.Body = []byte(formEncode(body))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	default:
		if r.Body, err = json.Marshal(body); err != nil {
			return nil, fmt.Errorf("%w: encode body: %w", ErrBuildRequest, err)
		}
		r.Header.Set("Content-Type", "application/json")
	}
	r.Header.Set("Accept", "application/json")
	for name, value := range c.Headers {
		r.Header.Set(name, value)
	}
	if c.Idempotency != nil {
		r.Header.Set(c.Idempotency.Header, req.ExternalKey)
	}
	c.credential.set(r.Header)
	return r, nil
}

// paramsObject decodes params (a JSON object; empty or null is {}) into
// the values expressions read. A fresh map every call: the v1 body writes
// the key into it.
func paramsObject(params json.RawMessage) (map[string]any, error) {
	trimmed := bytes.TrimSpace(params)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return map[string]any{}, nil
	}
	v, ok := celexpr.ParseJSON(trimmed)
	m, isObject := v.(map[string]any)
	if !ok || !isObject {
		return nil, errors.New("params must be a JSON object")
	}
	return m, nil
}

// paramPrefix starts a {params.NAME} placeholder.
const paramPrefix = "{params."

// expandPath substitutes {reference} and {params.NAME} in path:
// path-escaped before a "?", query-escaped after it.
func expandPath(path, key string, params map[string]any) (string, error) {
	query := strings.Index(path, "?")
	var out strings.Builder
	for i := 0; i < len(path); {
		escape := url.PathEscape
		if query >= 0 && i > query {
			escape = url.QueryEscape
		}
		switch {
		case strings.HasPrefix(path[i:], ReferencePlaceholder):
			out.WriteString(escape(key))
			i += len(ReferencePlaceholder)
		case strings.HasPrefix(path[i:], paramPrefix):
			end := strings.IndexByte(path[i:], '}')
			name := path[i+len(paramPrefix) : i+end]
			v, err := pathValue(params, name)
			if err != nil {
				return "", err
			}
			out.WriteString(escape(v))
			i += end + 1
		default:
			out.WriteByte(path[i])
			i++
		}
	}
	return out.String(), nil
}

// pathValue is param name as text in a path: a non-empty string, a
// number or a bool.
func pathValue(params map[string]any, name string) (string, error) {
	v, ok := params[name]
	if !ok {
		return "", fmt.Errorf("params has no %q for {params.%s}", name, name)
	}
	s, err := scalarText(v)
	if err != nil || s == "" {
		return "", fmt.Errorf("params.%s cannot be written in a path: it must be a non-empty string, a number or a bool", name)
	}
	return s, nil
}

// pathParams are the names of the {params.NAME} placeholders in path; an
// error for one that is not closed or names nothing.
func pathParams(path string) ([]string, error) {
	var names []string
	for rest := path; ; {
		i := strings.Index(rest, paramPrefix)
		if i < 0 {
			return names, nil
		}
		rest = rest[i+len(paramPrefix):]
		end := strings.IndexByte(rest, '}')
		if end <= 0 || strings.ContainsAny(rest[:end], "{/?&") {
			return nil, fmt.Errorf("has a %s placeholder that is not of the form {params.NAME}", paramPrefix)
		}
		names = append(names, rest[:end])
		rest = rest[end+1:]
	}
}

// formEncode writes body as application/x-www-form-urlencoded with nested
// keys as Stripe writes them (https://docs.stripe.com/api/request-body
// style): metadata[reference]=…, items[0][price]=…; booleans true/false;
// null is left out; keys in sorted order, so one body has one encoding.
func formEncode(body map[string]any) string {
	var pairs []string
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch v := v.(type) {
		case nil:
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				walk(key+"["+k+"]", v[k])
			}
		case []any:
			for i, e := range v {
				walk(key+"["+strconv.Itoa(i)+"]", e)
			}
		default:
			s, _ := scalarText(v)
			pairs = append(pairs, url.QueryEscape(key)+"="+url.QueryEscape(s))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(body)) {
		walk(k, body[k])
	}
	return strings.Join(pairs, "&")
}

// scalarText writes a JSON scalar as text.
func scalarText(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case uint64:
		return strconv.FormatUint(v, 10), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	}
	return "", fmt.Errorf("a %T is not a scalar", v)
}
