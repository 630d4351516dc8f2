// Package dispatcher is the part of actledger that touches the outside
// world: workers consume dispatch messages from JetStream and call
// providers so that one operation produces at most one external effect,
// whatever fails in between.
//
// Ownership comes from the ledger, never from JetStream: a worker claims an
// operation with one conditional update (status, version, lease), and
// every later write is conditional on the version it claimed. A duplicated
// or redelivered message, or several workers racing, therefore lead to one
// provider call; a worker whose lease expired is fenced, and what it saw is
// kept as evidence only.
//
// No call outlives its claim. The lease end is the database's clock plus
// the lease, set by the claiming statement. Right before every create and
// every lookup the worker confirms, in one conditional statement, that the
// claim is still its own (version, owner, still dispatching), extends the
// lease so that the provider's full timeout plus a margin fits before it
// ends, and reads again whether the approval and the token stand. A worker
// must never call the provider without that confirmation, and never after
// it failed: a superseded worker stops. The "last send" lookups wait the
// visibility lag after is the latest moment a call may still have been in
// flight (the call's deadline, or the end of an expired lease). See
// docs/dispatch-lease.md.
//
// Every call carries the operation's original external key. An outcome that
// may have happened (timeout, reset, 5xx, an expired lease) is unknown and
// is never resent blindly: a provider with an idempotency contract is asked
// again with the same key inside its retention window (it answers with its
// stored result); otherwise a lookup that finds the effect settles it, an
// "absent" is believed only after the provider's visibility lag, and only
// from the account and environment the operation was sent to; anything
// else goes to a person (review). A success that a fenced worker saw still
// reaches the reconciler as evidence.
//
// Retry and lookup schedules are outbox rows with a due time, which the
// ledger writes with the state that waits for them (the dispatcher writes
// none), so a restart neither loses nor hurries them. The LeaseSweeper
// moves claims whose lease is still expired to unknown and re-publishes
// operations whose message never arrived, backing off per operation.
//
// The files, by concern:
//
//   - dispatcher.go: Config, New, and the consumers that hand each dispatch
//     message to a worker (Start, Stop).
//   - claim.go: from a message to a claim (execute), and keeping it: the
//     call slots, the confirmation before every call, the lease a call
//     must fit in.
//   - work.go: the work on one claimed operation: the create, the answer
//     handed to the policy, and following its decision.
//   - outcome.go: the policy. decide is a pure function from the operation,
//     the provider's contract, what just happened (an answer, an expired
//     lease, a claim from unknown, a lapse, a lookup's verdict), what the
//     ledger says beyond the row, and the time, to the changes to record
//     and the next step. Workers and the LeaseSweeper follow the same one;
//     its table test is the policy's specification.
//   - lookup.go: asking the provider whether an effect exists, believed by
//     the ledger's one rule (ledger.JudgeLookup).
//   - record.go: recording a decision under the claim's version, and what a
//     fenced worker keeps as evidence instead.
//   - lease_sweeper.go: the LeaseSweeper.
package dispatcher
