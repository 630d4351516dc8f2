package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// CreateApprovalRequest is the body of POST /v1/approvals (role approver).
type CreateApprovalRequest struct {
	Action string          `json:"action"`
	Params json.RawMessage `json:"params"`
	// ExpiresAt or TTLSeconds bound the approval (one of them; neither:
	// the API's default).
	ExpiresAt     *time.Time `json:"expires_at,omitempty"`
	TTLSeconds    int64      `json:"ttl_seconds,omitempty"`
	PolicyVersion string     `json:"policy_version,omitempty"`
	// MaxUses is how many operations may use it; 0 means the API's
	// default of one.
	MaxUses int `json:"max_uses,omitempty"`
}

// CreateApproval is POST /v1/approvals.
func (c *Client) CreateApproval(ctx context.Context, req CreateApprovalRequest) (*Approval, error) {
	var a Approval
	if _, err := c.do(ctx, http.MethodPost, "/v1/approvals", nil, nil, req, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// RevokeApproval is POST /v1/approvals/{id}/revoke: the approval stops
// authorizing, and operations under it that were never sent are held.
func (c *Client) RevokeApproval(ctx context.Context, id string) (*Revocation, error) {
	var r Revocation
	if _, err := c.do(ctx, http.MethodPost, pathID("/v1/approvals/", id, "/revoke"), nil, nil, struct{}{}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ApprovalRequestsPage is one page of open proposals, oldest first.
type ApprovalRequestsPage struct {
	Items      []ApprovalRequest `json:"items"`
	NextCursor string            `json:"next_cursor,omitempty"`
}

// ListApprovalRequests is GET /v1/approval-requests (role approver).
func (c *Client) ListApprovalRequests(ctx context.Context, opts PageOptions) (*ApprovalRequestsPage, error) {
	var page ApprovalRequestsPage
	if _, err := c.do(ctx, http.MethodGet, "/v1/approval-requests", opts.query(), nil, nil, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// AllApprovalRequests follows every page of the open proposals.
func (c *Client) AllApprovalRequests(ctx context.Context) ([]ApprovalRequest, error) {
	return All(ctx, func(ctx context.Context, opts PageOptions) ([]ApprovalRequest, string, error) {
		p, err := c.ListApprovalRequests(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		return p.Items, p.NextCursor, nil
	})
}

// ApproveRequest is the body of POST /v1/operations/{id}/approve.
type ApproveRequest struct {
	// ParamsFingerprint is the fingerprint of the params the approver
	// saw; the API refuses (409 fingerprint_mismatch) if they changed.
	ParamsFingerprint string `json:"params_fingerprint"`
	PolicyVersion     string `json:"policy_version,omitempty"`
	TTLSeconds        int64  `json:"ttl_seconds,omitempty"`
	Note              string `json:"note,omitempty"`
}

// Approve is POST /v1/operations/{id}/approve: the proposal is queued
// under a new approval.
func (c *Client) Approve(ctx context.Context, id string, req ApproveRequest) (*Operation, error) {
	return c.operationCall(ctx, pathID("/v1/operations/", id, "/approve"), req)
}

// Deny is POST /v1/operations/{id}/deny: the proposal is cancelled and
// the agent told reason.
func (c *Client) Deny(ctx context.Context, id, reason string) (*Operation, error) {
	return c.operationCall(ctx, pathID("/v1/operations/", id, "/deny"), map[string]string{"reason": reason})
}

// operationCall POSTs body to path and decodes the operation answered.
func (c *Client) operationCall(ctx context.Context, path string, body any) (*Operation, error) {
	var op Operation
	a, err := c.do(ctx, http.MethodPost, path, nil, nil, body, &op)
	if err != nil {
		return nil, err
	}
	op.ETag = a.header.Get("ETag")
	return &op, nil
}
