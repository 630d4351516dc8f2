package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// DispatchScope narrows a pause or resume; empty fields match any.
type DispatchScope struct {
	Provider string `json:"provider"`
	Action   string `json:"action"`
}

// PauseDispatch is POST /v1/dispatch/pause (role operator): matching work
// stays queued; calls already in flight finish.
func (c *Client) PauseDispatch(ctx context.Context, scope DispatchScope) (*DispatchStatus, error) {
	var st DispatchStatus
	if _, err := c.do(ctx, http.MethodPost, "/v1/dispatch/pause", nil, nil, scope, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// ResumeDispatch is POST /v1/dispatch/resume: every pause within scope is
// removed and the work it held released.
func (c *Client) ResumeDispatch(ctx context.Context, scope DispatchScope) (*DispatchStatus, error) {
	var st DispatchStatus
	if _, err := c.do(ctx, http.MethodPost, "/v1/dispatch/resume", nil, nil, scope, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Dispatch is GET /v1/dispatch: the pauses and one page of the calls in
// flight.
func (c *Client) Dispatch(ctx context.Context, opts PageOptions) (*DispatchStatus, error) {
	var st DispatchStatus
	if _, err := c.do(ctx, http.MethodGet, "/v1/dispatch", opts.query(), nil, nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// AllDispatch is Dispatch with every page of the calls in flight.
func (c *Client) AllDispatch(ctx context.Context) (*DispatchStatus, error) {
	var st DispatchStatus
	inFlight, err := All(ctx, func(ctx context.Context, opts PageOptions) ([]InFlight, string, error) {
		p, err := c.Dispatch(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		st.Paused = p.Paused
		return p.InFlight, p.NextCursor, nil
	})
	st.InFlight = inFlight
	return &st, err
}

// ReviewPage is one page of the review list.
type ReviewPage struct {
	Items      []ReviewItem `json:"items"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// Review is GET /v1/review (role operator): operations in review, then
// unmatched evidence.
func (c *Client) Review(ctx context.Context, opts PageOptions) (*ReviewPage, error) {
	var page ReviewPage
	if _, err := c.do(ctx, http.MethodGet, "/v1/review", opts.query(), nil, nil, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// AllReview follows every page of the review list.
func (c *Client) AllReview(ctx context.Context) ([]ReviewItem, error) {
	return All(ctx, func(ctx context.Context, opts PageOptions) ([]ReviewItem, string, error) {
		p, err := c.Review(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		return p.Items, p.NextCursor, nil
	})
}

// Resolution is the body of POST /v1/operations/{id}/resolve: what a
// person found at the provider.
type Resolution struct {
	// Outcome is succeeded, failed (confirmed no effect) or cancelled.
	Outcome           string `json:"outcome"`
	ProviderReference string `json:"provider_reference,omitempty"`
	Note              string `json:"note"`
}

// ResolveOperation is POST /v1/operations/{id}/resolve. The answer is the
// operation, with Compensation set when the resolution created one.
func (c *Client) ResolveOperation(ctx context.Context, id string, res Resolution) (*Operation, error) {
	return c.operationCall(ctx, pathID("/v1/operations/", id, "/resolve"), res)
}

// RetryOperation is POST /v1/operations/{id}/retry: send again, with the
// same external key.
func (c *Client) RetryOperation(ctx context.Context, id, note string) (*Operation, error) {
	return c.operationCall(ctx, pathID("/v1/operations/", id, "/retry"), map[string]string{"note": note})
}

// ResolveEvidence is POST /v1/review/evidence/{id}/resolve: unmatched
// evidence is closed with a note.
func (c *Client) ResolveEvidence(ctx context.Context, id int64, note string) error {
	_, err := c.do(ctx, http.MethodPost, "/v1/review/evidence/"+strconv.FormatInt(id, 10)+"/resolve", nil, nil, map[string]string{"note": note}, nil)
	return err
}

// ReplayRequest is the body of POST /v1/review/replay.
type ReplayRequest struct {
	// Since is an RFC 3339 time or a duration such as 24h; "" is all.
	Since  string `json:"since,omitempty"`
	Reason string `json:"reason,omitempty"`
	DryRun bool   `json:"dry_run,omitempty"`
}

// Replay is POST /v1/review/replay: it re-runs reconciliation over the
// review stream, handing each item to onItem as the server settles it
// (the answer streams; only ctx bounds it), and returns the totals.
func (c *Client) Replay(ctx context.Context, req ReplayRequest, onItem func(ReplayItem)) (*ReplaySummary, error) {
	const path = "/v1/review/replay"
	res, err := c.send(ctx, c.streaming, http.MethodPost, path, nil, nil, req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		raw, _ := readAll(res)
		return nil, decodeError(res.StatusCode, raw)
	}
	dec := json.NewDecoder(res.Body)
	for {
		var line struct {
			Item    *ReplayItem    `json:"item"`
			Summary *ReplaySummary `json:"summary"`
			Error   *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := dec.Decode(&line); errors.Is(err, io.EOF) {
			return nil, errors.New("actledger replay: the server closed the stream before the summary")
		} else if err != nil {
			return nil, fmt.Errorf("actledger replay: %w", err)
		}
		switch {
		case line.Item != nil:
			if onItem != nil {
				onItem(*line.Item)
			}
		case line.Summary != nil:
			return line.Summary, nil
		case line.Error != nil:
			return nil, &Error{Status: res.StatusCode, Code: line.Error.Code, Message: line.Error.Message}
		}
	}
}
