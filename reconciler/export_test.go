package reconciler

import (
	"context"

	"github.com/google/uuid"

	"github.com/actledger/actledger/ledger"
)

// ReviewItems lists every open review item of the tenant, page after page:
// for tests. The API serves pages (ReviewPage).
func (r *Reconciler) ReviewItems(ctx context.Context, tenant uuid.UUID) ([]ReviewItem, error) {
	var all []ReviewItem
	var after *ReviewCursor
	for {
		items, next, err := r.ReviewPage(ctx, ledger.WholeTenant(tenant), after, 500)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if next == nil {
			return all, nil
		}
		after = next
	}
}
