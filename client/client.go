// Package client is actledger's Go client: one typed method per route of
// the HTTP API (docs/api.md, /openapi.json), so the CLI, the MCP server
// and any Go agent speak to actledger the same way and nobody hand-writes
// HTTP glue.
//
// Every method takes a context first and returns the API's refusals as a
// *Error carrying the HTTP status and the API's machine-readable code
// (errors.As, or Code(err)). A Client holds no global state; it is safe for
// concurrent use.
package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/actledger/actledger/tracing"
)

// DefaultTimeout bounds one request that does not wait (a long poll adds
// its wait), when Options.HTTPClient is not given.
const DefaultTimeout = 30 * time.Second

// maxAnswer bounds the body the client reads from one answer.
const maxAnswer = 16 << 20

// Error is a refusal of the API: its HTTP status and the code and message
// of its error body. Code is what programs branch on
// ("key_reused_with_different_params", "approval_expired", "invalid_params",
// "unauthenticated", "not_found", ...).
type Error struct {
	Status  int
	Code    string
	Message string
	// Operation names the operation a refusal is about: for
	// key_reused_with_different_params, the one that holds the key (the
	// same intention may be there, already done or under way).
	Operation *OperationRef
}

// OperationRef names an operation in an API error.
type OperationRef struct {
	ID      string `json:"id"`
	Status  Status `json:"status"`
	Summary string `json:"summary"`
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("actledger: %d %s", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("actledger: %d %s: %s", e.Status, e.Code, e.Message)
}

// Code returns the API error code of err, or "" when err is not an API
// refusal (a network error, a cancelled context).
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// IsNotFound reports whether err is the API's 404: no such object in the
// token's tenant.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// Options configures a Client. Zero values mean the defaults.
type Options struct {
	// HTTPClient sends the requests. Default: an http.Client with
	// DefaultTimeout, whose timeout is lifted for long polls and replays
	// (the request's context bounds those).
	HTTPClient *http.Client
	// UserAgent is sent with every request. Default "actledger-go-client".
	UserAgent string
}

// Client calls one actledger API with one bearer token; what it may do
// and see is what the token's role and tenant may.
type Client struct {
	base      string
	token     string
	http      *http.Client
	streaming *http.Client // no overall timeout: long polls and replays
	userAgent string
}

// New returns a client of the API at baseURL ("http://127.0.0.1:8080";
// a bare host:port gets http://) that authenticates with token.
func New(baseURL, token string, opts Options) *Client {
	base := strings.TrimRight(baseURL, "/")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		base = "http://" + base
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: DefaultTimeout}
	}
	streaming := *hc
	streaming.Timeout = 0
	return &Client{base: base, token: token, http: hc, streaming: &streaming, userAgent: cmp.Or(opts.UserAgent, "actledger-go-client")}
}

// BaseURL is the API's address as the client uses it.
func (c *Client) BaseURL() string { return c.base }

// answer is what do hands back of a response besides the decoded body.
type answer struct {
	status int
	header http.Header
}

// do sends one request and decodes a 2xx JSON answer into out (nil: the
// body is dropped). A 304 is a success with nothing to decode.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, header http.Header, body, out any) (answer, error) {
	return c.doOn(ctx, c.http, method, path, query, header, body, out)
}

// doOn is do with the HTTP client hc: c.streaming for a request the
// server may take longer than DefaultTimeout to answer.
func (c *Client) doOn(ctx context.Context, hc *http.Client, method, path string, query url.Values, header http.Header, body, out any) (answer, error) {
	res, err := c.send(ctx, hc, method, path, query, header, body)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	a := answer{status: res.StatusCode, header: res.Header}
	if res.StatusCode == http.StatusNotModified {
		return a, nil
	}
	raw, err := readAll(res)
	if err != nil {
		return a, fmt.Errorf("actledger %s %s: %w", method, path, err)
	}
	if res.StatusCode >= 300 {
		return a, decodeError(res.StatusCode, raw)
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return a, fmt.Errorf("actledger %s %s: decode answer: %w", method, path, err)
		}
	}
	return a, nil
}

// readAll reads an answer's body, at most maxAnswer bytes.
func readAll(res *http.Response) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	return raw, nil
}

// send builds and sends a request; the caller closes the body.
func (c *Client) send(ctx context.Context, hc *http.Client, method, path string, query url.Values, header http.Header, body any) (*http.Response, error) {
	var rd io.Reader = http.NoBody
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("actledger %s %s: encode request: %w", method, path, err)
		}
		rd = bytes.NewReader(raw)
	}
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("actledger %s %s: %w", method, path, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	// A call made in a trace (an MCP tool call's) is a child of it at the
	// server; nothing is added without one.
	tracing.Propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("actledger at %s: %w", c.base, err)
	}
	return res, nil
}

// decodeError turns an error answer into *Error; a body that is not the
// API's error shape keeps the status alone.
func decodeError(status int, raw []byte) error {
	var e struct {
		Error struct {
			Code      string        `json:"code"`
			Message   string        `json:"message"`
			Operation *OperationRef `json:"operation"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &e)
	return &Error{Status: status, Code: e.Error.Code, Message: e.Error.Message, Operation: e.Error.Operation}
}

// PageOptions asks for one page of a list: Limit items (0: the API's
// default) after Cursor (the previous page's NextCursor; "" from the start).
type PageOptions struct {
	Limit  int
	Cursor string
}

func (p PageOptions) query() url.Values {
	q := url.Values{}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	return q
}

// MaxPageLimit is the largest page the API serves; the All* helpers ask
// for it.
const MaxPageLimit = 500

// All calls page with the cursor of each next page, starting from the
// first, and gathers the items until a page has no next cursor. It is the
// pagination helper behind the All* methods, for any list.
func All[T any](ctx context.Context, page func(ctx context.Context, opts PageOptions) (items []T, next string, err error)) ([]T, error) {
	var out []T
	opts := PageOptions{Limit: MaxPageLimit}
	for {
		items, next, err := page(ctx, opts)
		if err != nil {
			return out, err
		}
		out = append(out, items...)
		if next == "" {
			return out, nil
		}
		opts.Cursor = next
	}
}

// pathID puts id into a path as one segment. Dots are escaped too: an id
// of "." or ".." would otherwise be a path step, which the server's path
// cleaning redirects to another route (GET /v1/operations/. is the list
// of operations, decoded as an empty operation); escaped, it is an id the
// API refuses like any other it does not know.
func pathID(prefix, id, suffix string) string {
	return prefix + strings.ReplaceAll(url.PathEscape(id), ".", "%2E") + suffix
}
