// Package provider is the adapter to the suppliers that carry out side effects: what actledger
// knows of each (how to reach it and authenticate, how its create request is built and its
// answers read, its idempotency and lookup promises, its webhooks, its retry, breaker and review
// policy) and the HTTP client that calls a supplier and classifies its answer.
//
// It also loads the providers file into a [Registry]. Each section of the file is converted by
// the package that owns it: providers: here, actions: by package action (what an action is: its
// contract, which never talks to a supplier), notifications: here; the registry binds each action
// to the config of the provider that executes it. Code that needs only a contract (its params
// schema, approval policy or business key) uses package action's types.
//
// The classification is the heart of the package. Every answer, or absence of one, lands in
// exactly one [Class]:
//
//   - [ClassSucceeded]: the supplier confirmed the effect (2xx).
//   - [ClassRejected]: the supplier confirmed a rejection with no effect (400/401/403/404/422).
//   - [ClassNotExecuted]: the request provably had no effect (429, 503 with Retry-After, or the
//     request never left this process, e.g. connection refused).
//   - [ClassUnknown]: everything else — the request may have reached the supplier and nothing
//     confirmed what happened (timeouts, resets, other 5xx, 409 conflicts, redirects, odd codes).
//
// Only what the product contract names as "no effect" is ever classified as no effect; any doubt
// is [ClassUnknown], because a lost response is an unknown outcome, never a failure.
//
// What this package must never do:
//
//   - touch Postgres or NATS, or change an operation's state: it reports; the dispatcher and the
//     reconciler decide and record;
//   - send a request twice on its own: net/http's silent replay of requests carrying an
//     Idempotency-Key header is deliberately disabled (see [HTTP.Create]), so one call of Create
//     is at most one arrival at the supplier and the attempt log stays true;
//   - follow redirects: a redirect is reported as it is (classified unknown), never turned into a
//     different request;
//   - put secrets, request URLs or whole response bodies into results: bodies are capped at
//     2 KiB of evidence.
package provider
