// Package api is actledger's HTTP interface: the agent's operations, the
// approver's approvals, health and metrics, as ../PRODUCT.md (the product
// contract) describes them.
//
// Every request is authenticated (token → tenant and role) before anything
// else, and every lookup is scoped to the caller's tenant, so another
// tenant's object answers 404 exactly like a missing one. Errors are mapped
// to statuses and codes in one place (errors.go); bodies are always
// {"error":{"code","message"}} and never carry internals.
//
// The API never calls providers and never publishes to NATS: it writes the
// ledger and the outbox in one transaction, and the relay and dispatcher do
// the rest.
package api
