package client

import (
	"context"
	"net/http"
	"time"
)

// Reconciliation is one run of a provider's statement: the ledger
// compared with the records the supplier lists for [Since, Until).
type Reconciliation struct {
	ID         string     `json:"id"`
	Provider   string     `json:"provider"`
	Since      time.Time  `json:"since"`
	Until      time.Time  `json:"until"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	// Status is running, complete, incomplete, failed or yielded.
	Status string  `json:"status"`
	Actor  string  `json:"actor"`
	Pages  int     `json:"pages"`
	Error  *string `json:"error"`
	// Findings counts each finding: matched, settles, mismatch,
	// duplicate, missing, unexplained, foreign, skipped.
	Findings map[string]int64 `json:"findings"`
}

// ReconciliationsPage is one page of GET /v1/reconciliations.
type ReconciliationsPage struct {
	Reconciliations []Reconciliation `json:"reconciliations"`
	NextCursor      string           `json:"next_cursor,omitempty"`
}

// Reconciliations is GET /v1/reconciliations (role operator): the
// tenant's statement runs, newest first.
func (c *Client) Reconciliations(ctx context.Context, opts PageOptions) (*ReconciliationsPage, error) {
	var page ReconciliationsPage
	if _, err := c.do(ctx, http.MethodGet, "/v1/reconciliations", opts.query(), nil, nil, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// ReconcileRequest is the body of POST /v1/reconciliations. A zero Since
// or Until is the provider's own window.
type ReconcileRequest struct {
	Provider string     `json:"provider"`
	Since    *time.Time `json:"since,omitempty"`
	Until    *time.Time `json:"until,omitempty"`
	DryRun   bool       `json:"dry_run,omitempty"`
}

// Finding is a record or an operation a run says needs a person, or a
// record it skipped (Skipped says why).
type Finding struct {
	Finding           string     `json:"finding"`
	OperationID       *string    `json:"operation_id"`
	Reference         *string    `json:"reference"`
	ProviderReference *string    `json:"provider_reference"`
	Created           *time.Time `json:"created"`
	Skipped           *string    `json:"skipped"`
}

// ReconcileResult is what POST /v1/reconciliations answers when its run
// ends.
type ReconcileResult struct {
	Reconciliation Reconciliation `json:"reconciliation"`
	DryRun         bool           `json:"dry_run"`
	Attention      []Finding      `json:"attention"`
	// AttentionNotListed counts the findings beyond Attention's bound.
	AttentionNotListed int64 `json:"attention_not_listed"`
}

// Reconcile is POST /v1/reconciliations (role operator, whole tenant):
// runs the provider's statement now and answers when it ends, which may
// take longer than DefaultTimeout: ctx bounds the wait.
func (c *Client) Reconcile(ctx context.Context, req ReconcileRequest) (*ReconcileResult, error) {
	var out ReconcileResult
	if _, err := c.doOn(ctx, c.streaming, http.MethodPost, "/v1/reconciliations", nil, nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
