// Package view is the contract's JSON shape of an operation and of its
// history: what GET /v1/operations/{id} and GET /v1/operations/{id}/events
// answer, and what a retention archive keeps of a pruned operation.
//
// It is the one writer of that shape, so an archived line reads exactly as
// the API did while the operation was in the ledger. It never reads the
// database and never decides who may see what: callers pass what a reader
// may see (Answers).
package view
