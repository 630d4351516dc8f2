package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"text/tabwriter"

	"github.com/actledger/actledger/ledger"
)

// checkedOperation is what the invariants read of one operation.
type checkedOperation struct {
	id, externalKey string
	status          ledger.Status
	reviewReason    *string
	reviewOwner     *string
	hasDeadline     bool
}

// Queries the check runs, against the soak's own database.
const (
	operationsQuery = `SELECT id::text, external_key, status, review_reason, review_owner, review_deadline IS NOT NULL FROM operations`
	eventsQuery     = `SELECT operation_id::text, from_status, to_status FROM operation_events ORDER BY operation_id, seq`
)

// terminal are the states an operation may rest in after quiescence
// (review is checked separately: it needs an owner and a deadline).
var terminal = []ledger.Status{ledger.StatusSucceeded, ledger.StatusFailed, ledger.StatusCancelled, ledger.StatusHeld}

// check runs the invariants, prints the table and returns the exit code.
func (s *soak) check() int {
	ctx := context.Background()
	var violations []string
	violate := func(f string, args ...any) {
		if len(violations) < 20 {
			fmt.Printf("VIOLATION: "+f+"\n", args...)
		}
		violations = append(violations, fmt.Sprintf(f, args...))
	}

	rows, err := s.pool.Query(ctx, operationsQuery)
	if err != nil {
		s.e.Fatal(err)
	}
	ops := map[string]checkedOperation{}
	for rows.Next() {
		var o checkedOperation
		if err := rows.Scan(&o.id, &o.externalKey, &o.status, &o.reviewReason, &o.reviewOwner, &o.hasDeadline); err != nil {
			s.e.Fatal(err)
		}
		ops[o.id] = o
	}
	if err := rows.Err(); err != nil {
		s.e.Fatal(err)
	}

	byStatus := map[ledger.Status]int{}
	byReview := map[string]int{}
	duplicates, lost, explained := 0, 0, 0
	for _, o := range ops {
		byStatus[o.status]++
		orders := s.supplier.Orders(o.externalKey)
		explained += orders
		dupReview := o.status == ledger.StatusReview && o.reviewReason != nil && *o.reviewReason == "duplicate_effect"
		if orders > 1 {
			duplicates++
			if !dupReview {
				violate("operation %s has %d orders and is %s, not in review as duplicate_effect", o.id, orders, o.status)
			}
		}
		switch {
		case o.status == ledger.StatusReview:
			reason := "?"
			if o.reviewReason != nil {
				reason = *o.reviewReason
			}
			byReview[reason]++
			if o.reviewOwner == nil || *o.reviewOwner == "" || !o.hasDeadline {
				violate("operation %s is in review (%s) without an owner and a deadline", o.id, reason)
			}
		case !slices.Contains(terminal, o.status):
			violate("operation %s is still %s after quiescence", o.id, o.status)
		}
	}
	s.mu.Lock()
	for id := range s.accepted {
		if _, ok := ops[id]; !ok {
			lost++
			violate("accepted operation %s is not in the ledger", id)
		}
	}
	accepted, refused := len(s.accepted), s.refused
	s.mu.Unlock()
	if total := s.supplier.TotalOrders(); total != explained {
		violate("the supplier holds %d orders, only %d are explained by operations", total, explained)
	}

	// Every history is a path of the transition table.
	rows, err = s.pool.Query(ctx, eventsQuery)
	if err != nil {
		s.e.Fatal(err)
	}
	last := map[string]ledger.Status{}
	for rows.Next() {
		var id string
		var from *ledger.Status
		var to ledger.Status
		if err := rows.Scan(&id, &from, &to); err != nil {
			s.e.Fatal(err)
		}
		prev, seen := last[id]
		switch {
		case !seen && from != nil:
			violate("operation %s: first event starts from %s, not from nothing", id, *from)
		case seen && (from == nil || *from != prev):
			violate("operation %s: an event starts from %v but the previous one ended in %s", id, from, prev)
		case from != nil && *from != to && !slices.Contains(ledger.Transitions[*from], to):
			violate("operation %s: %s -> %s is not in the transition table", id, *from, to)
		}
		last[id] = to
	}
	if err := rows.Err(); err != nil {
		s.e.Fatal(err)
	}
	for id, o := range ops {
		if st, ok := last[id]; !ok || st != o.status {
			violate("operation %s is %s but its history ends in %q", id, o.status, st)
		}
	}

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\nseed\t%d\n", s.o.seed)
	fmt.Fprintf(w, "duration\t%s\n", s.o.duration)
	fmt.Fprintf(w, "submitted, accepted\t%d\n", accepted)
	fmt.Fprintf(w, "submitted, refused (API down or Postgres cut)\t%d\n", refused)
	for _, r := range s.refusals {
		fmt.Fprintf(w, "  e.g.\t%s\n", r)
	}
	fmt.Fprintf(w, "operations in the ledger\t%d\n", len(ops))
	for _, k := range sortedKeys(s.faults) {
		fmt.Fprintf(w, "fault: %s\t%d\n", k, s.faults[k])
	}
	for _, k := range sortedKeys(s.supplied) {
		fmt.Fprintf(w, "supplier fault: %s\t%d\n", k, s.supplied[k])
	}
	for _, k := range sortedKeys(byStatus) {
		fmt.Fprintf(w, "status: %s\t%d\n", k, byStatus[k])
	}
	for _, k := range sortedKeys(byReview) {
		fmt.Fprintf(w, "review: %s\t%d\n", k, byReview[k])
	}
	fmt.Fprintf(w, "orders at the supplier\t%d\n", s.supplier.TotalOrders())
	fmt.Fprintf(w, "operations with two orders\t%d\n", duplicates)
	fmt.Fprintf(w, "lost\t%d\n", lost)
	fmt.Fprintf(w, "invariant violations\t%d\n", len(violations))
	w.Flush()
	if len(violations) > 0 {
		return 1
	}
	return 0
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
