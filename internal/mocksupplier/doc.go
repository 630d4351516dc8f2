// Package mocksupplier is a fault-injecting stand-in for a real supplier's order API ("acme"),
// used by demos, tests and the benchmark. It is a test double, under internal/ so that nothing
// outside actledger builds on it: no production code path of actledger may import it (package
// app's TestProductPackagesImportNoTestDouble checks every package's imports). The actledger
// binary does link it, for one command only: `actledger demo` tells the lost-response story
// against a supplier in its own process, which commits an order and then drops the connection,
// so that the story needs nothing but the binary. `serve` never reaches it: the process it runs
// is wired by package app, which imports no test double
// (TestServeWiringDoesNotLinkTheMockSupplier checks the import graph).
//
// It behaves like a real order API with Stripe-like idempotency keys, so that actledger can be
// exercised against the failures that matter in practice:
//
//   - POST /v1/orders creates an order. With an Idempotency-Key header (mode Honour, the default)
//     the first response is stored and a repeat with the same key and the same body is answered
//     from the store (header Idempotent-Replayed: true) without a new order; the same key with a
//     different body is refused with 400, and a repeat while the first is still running with 409.
//     In mode Ignore every POST creates an order, like a supplier with no idempotency contract.
//   - GET /v1/orders?client_reference=X lists that reference's orders, hiding those younger than
//     the lookup lag (eventual consistency of a search index); GET /v1/orders/{id} is consistent.
//   - Faults, queued for the whole run or per reference and consumed one per create request: a
//     response lost after commit (the connection is closed with no answer), a 500 after commit,
//     503 or 429 with Retry-After before commit, 422 before commit, a delay after commit, a
//     commit that lands late whether or not the client still waits, a stall that creates
//     nothing, or a 401 before the Idempotency-Key is looked at (rotated credentials).
//   - GET /v1/statement?created_gte=&created_lt=&limit=&after= lists the orders created in a
//     window, oldest first, {"orders":[...],"next":cursor|null}, for reconciliation (statement.go);
//     its pages take faults of their own (SetStatementFaults: not JSON, 401, 429, 500, a loop, a
//     slow page), seeding helpers place what actledger did not make (seed.go), and SetGenerated
//     serves a large computed window for the benchmark.
//   - Slow lookups (SetLookupDelay) answer with the orders visible when the request arrived.
//   - Signed webhooks (Webhook-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>),
//     sent late and retried on non-2xx answers.
//
// Above all it is the ground truth tests count: Server.Orders reports how many orders really
// exist for a reference, whatever any client was told. The same facts, and the knobs above, are
// available over HTTP under /admin/ for out-of-process use (cmd/mocksupplier). The admin API has
// no authentication: bind it to a loopback address.
//
// Everything lives in memory behind one mutex (webhook deliveries, sent by package traffic,
// behind their own). Orders are indexed by id and by reference so the create and lookup paths
// never scan the whole store; several thousand orders per second pass through it when no faults
// are set. With Config.DataFile (the --data flag of cmd/mocksupplier) orders and idempotency
// records also go to an append-only file, fsynced before an order counts as committed, so a
// restarted supplier still knows every order it made and every key it answered: the count stays
// true across restarts. Open loads the file and refuses one it cannot read in full.
package mocksupplier
