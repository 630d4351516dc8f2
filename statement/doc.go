// Package statement compares the ledger with the supplier's own records:
// a run reads the records a provider lists for a window of time (its
// providers-file reconcile: section), matches each to the operation whose
// external key it names, and judges what the ledger cannot see on its own
// path: an effect made twice, an effect that differs from what was
// approved, a success the supplier does not list, an effect no operation
// explains (docs/contract.md, "Statement reconciliation").
//
// A run never sends a create and decides nothing by itself beyond
// settling an open outcome: each record that names an operation is
// applied as evidence by the reconciler (reconciler.Apply), the one writer
// of what evidence does to an operation, and a success the statement does
// not list goes to a person. One run at a time per provider across every
// process: the ledger's lease arbitrates (ledger.StartStatementRun).
//
// Memory is one page of records whatever the window: each page's records
// are judged and stored as they are read (statement_records), and the
// judgements that need the whole window (duplicates, missing successes)
// are queries over what was stored.
package statement
