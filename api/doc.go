// Package api is actledger's HTTP interface: the agent's operations, the
// approver's approvals, the operator's review and dispatch, health and
// metrics, as docs/contract.md (the contract) describes them and
// openapi.yaml (the OpenAPI 3.1 document, served at GET /openapi.json)
// specifies them. The mux is built from one route table (routeTable);
// tests hold the document and the table to each other, and check every
// request and answer of the API tests against the document.
//
// Every request is authenticated (token → tenant, role and access scope)
// before anything else, and every lookup goes through the ledger with the
// caller's ledger.Access (auth.Principal.Access), so another tenant's
// object, or another scope's, answers 404 exactly like a missing one; no
// handler filters on its own. Errors are mapped
// to statuses and codes in one place (errors.go); bodies are always
// {"error":{"code","message"}} and never carry internals.
//
// The API never calls providers and never publishes to NATS: it writes the
// ledger and the outbox in one transaction, and the relay and dispatcher do
// the rest.
package api
