package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

const (
	// compensationOriginal finds the operation a compensation was created
	// for (its EventCompensationFor), by the compensation's events.
	compensationOriginal = `SELECT (detail->>'operation_id')::uuid FROM operation_events
WHERE operation_id = $1 AND kind = '` + string(EventCompensationFor) + `' LIMIT 1`

	// compensatedForUpdate reads and locks the compensated operation.
	compensatedForUpdate = `SELECT status, version FROM operations WHERE id = $1 FOR UPDATE`
)

// compensationFailed opens review compensation_failed on the operation
// comp compensates, if comp is a compensation, naming comp and how it
// ended: a failed compensation is never silent. An operation that cannot
// move to review now (in flight, cancelled) gets the event alone.
func (s *Store) compensationFailed(ctx context.Context, tx *Tx, comp Operation, review Review) error {
	var original uuid.UUID
	err := tx.tx.QueryRow(ctx, compensationOriginal, comp.ID).Scan(&original)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find what operation %s compensates: %w", comp.ID, err)
	}
	var status Status
	var version int64
	if err := tx.tx.QueryRow(ctx, compensatedForUpdate, original).Scan(&status, &version); err != nil {
		return fmt.Errorf("read compensated operation %s: %w", original, err)
	}
	detail := map[string]any{
		"compensation_operation_id": comp.ID, "compensation_status": comp.Status,
		"why": "the compensation of this operation failed: its effect stands uncorrected",
	}
	if comp.ReviewReason != nil {
		detail["compensation_review_reason"] = *comp.ReviewReason
	}
	if !status.CanMoveTo(StatusReview) {
		return s.AppendEventTx(ctx, tx, original, EventCompensationFailed, "system", detail)
	}
	review.Reason = ReasonCompensationFailed
	_, err = s.transitionOne(ctx, tx.tx, Change{
		ID: original, From: status, Version: version, To: StatusReview, Kind: EventCompensationFailed,
		Actor: "system", Review: &review, Detail: detail,
	})
	return err
}
