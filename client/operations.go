package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// CreateOperationRequest is the body of POST /v1/operations.
type CreateOperationRequest struct {
	Action string `json:"action"`
	// Key is the caller's business key: the same key and params give the
	// same operation (a replay), the same key with other params a 409.
	// For an action with a business key (Action.BusinessKey) the server
	// derives the operation's key from Params and keeps Key, which may be
	// empty, as the operation's client key.
	Key    string          `json:"key,omitempty"`
	Params json.RawMessage `json:"params"`
	// ApprovalID names a person's approval of exactly these params.
	ApprovalID string `json:"approval_id,omitempty"`
	// RequestApproval makes the request a proposal that waits for a
	// decision (Key is then required, unless the action has a business
	// key); Reason is its sentence for the approver.
	RequestApproval bool   `json:"request_approval,omitempty"`
	Reason          string `json:"reason,omitempty"`
}

// CreateOperation is POST /v1/operations: it records the intention and
// queues it (201), replays an existing operation of the same key and
// params (200, Replayed), or stores a proposal (202 awaiting_approval, or
// 201 queued when the action's policy approves it).
func (c *Client) CreateOperation(ctx context.Context, req CreateOperationRequest) (*Operation, error) {
	var op Operation
	a, err := c.do(ctx, http.MethodPost, "/v1/operations", nil, nil, req, &op)
	if err != nil {
		return nil, err
	}
	op.ETag = a.header.Get("ETag")
	op.Replayed = a.header.Get("Idempotent-Replayed") == "true"
	return &op, nil
}

// Propose is CreateOperation with request_approval: the operation waits
// for a person (or the action's policy) to approve it; nothing is sent
// before.
func (c *Client) Propose(ctx context.Context, action, key string, params json.RawMessage, reason string) (*Operation, error) {
	return c.CreateOperation(ctx, CreateOperationRequest{Action: action, Key: key, Params: params, RequestApproval: true, Reason: reason})
}

// GetOperation is GET /v1/operations/{id}.
func (c *Client) GetOperation(ctx context.Context, id string) (*Operation, error) {
	op, _, err := c.getOperation(ctx, id, "", 0)
	return op, err
}

// MaxWait is the longest wait the API serves in one long poll (a longer
// ?wait= is a 400); WaitOperation asks for at most this.
const MaxWait = 60 * time.Second

// WaitOperation long-polls GET /v1/operations/{id}?wait= with
// If-None-Match: etag. It answers as soon as the operation's version is no
// longer etag (changed true, the new view), or when wait runs out (changed
// false, op nil: a 304). The API serves at most MaxWait per wait, so a
// longer wait is cut to MaxWait; ask again with the same etag to wait
// longer. An empty etag reads the operation at once.
func (c *Client) WaitOperation(ctx context.Context, id, etag string, wait time.Duration) (op *Operation, changed bool, err error) {
	return c.getOperation(ctx, id, etag, wait)
}

func (c *Client) getOperation(ctx context.Context, id, etag string, wait time.Duration) (*Operation, bool, error) {
	var q url.Values
	var h http.Header
	hc := c.http
	if etag != "" {
		h = http.Header{"If-None-Match": {etag}}
		if wait > 0 {
			wait = min(wait, MaxWait)
			q = url.Values{"wait": {strconv.Itoa(int((wait+time.Second-1)/time.Second)) + "s"}}
			hc = c.streaming // the context and the server bound the wait
		}
	}
	path := pathID("/v1/operations/", id, "")
	res, err := c.send(ctx, hc, http.MethodGet, path, q, h, nil)
	if err != nil {
		return nil, false, err
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusNotModified {
		return nil, false, nil
	}
	var op Operation
	if err := decodeAnswer(res, http.MethodGet, path, &op); err != nil {
		return nil, false, err
	}
	op.ETag = res.Header.Get("ETag")
	return &op, true, nil
}

// FindOperation is GET /v1/operations?action=&key=: the operation of
// that action and key, or a not_found *Error.
func (c *Client) FindOperation(ctx context.Context, action, key string) (*Operation, error) {
	var op Operation
	a, err := c.do(ctx, http.MethodGet, "/v1/operations", url.Values{"action": {action}, "key": {key}}, nil, nil, &op)
	if err != nil {
		return nil, err
	}
	op.ETag = a.header.Get("ETag")
	return &op, nil
}

// ListOperationsOptions filters GET /v1/operations.
type ListOperationsOptions struct {
	// Status keeps only operations in this state; "" keeps all.
	Status Status
	PageOptions
}

// OperationsPage is one page of the tenant's operations, newest first.
type OperationsPage struct {
	Operations []Operation `json:"operations"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// ListOperations is GET /v1/operations?status=&limit=&cursor=.
func (c *Client) ListOperations(ctx context.Context, opts ListOperationsOptions) (*OperationsPage, error) {
	q := opts.query()
	if opts.Status != "" {
		q.Set("status", string(opts.Status))
	}
	var page OperationsPage
	if _, err := c.do(ctx, http.MethodGet, "/v1/operations", q, nil, nil, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// EventsPage is one page of an operation's history, oldest first.
type EventsPage struct {
	Events     []Event `json:"events"`
	NextCursor string  `json:"next_cursor,omitempty"`
}

// OperationEvents is GET /v1/operations/{id}/events.
func (c *Client) OperationEvents(ctx context.Context, id string, opts PageOptions) (*EventsPage, error) {
	var page EventsPage
	if _, err := c.do(ctx, http.MethodGet, pathID("/v1/operations/", id, "/events"), opts.query(), nil, nil, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// AllOperationEvents follows every page of the operation's history.
func (c *Client) AllOperationEvents(ctx context.Context, id string) ([]Event, error) {
	return All(ctx, func(ctx context.Context, opts PageOptions) ([]Event, string, error) {
		p, err := c.OperationEvents(ctx, id, opts)
		if err != nil {
			return nil, "", err
		}
		return p.Events, p.NextCursor, nil
	})
}

// ListActions is GET /v1/actions: the configured actions, their
// descriptions and params schemas.
func (c *Client) ListActions(ctx context.Context) ([]Action, error) {
	var out struct {
		Actions []Action `json:"actions"`
	}
	if _, err := c.do(ctx, http.MethodGet, "/v1/actions", nil, nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Actions, nil
}

// decodeAnswer reads a response do-style: *Error for a refusal, else the
// JSON body into out.
func decodeAnswer(res *http.Response, method, path string, out any) error {
	raw, err := readAll(res)
	if err != nil {
		return err
	}
	if res.StatusCode >= 300 {
		return decodeError(res.StatusCode, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("actledger %s %s: decode answer: %w", method, path, err)
	}
	return nil
}
