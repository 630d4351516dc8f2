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
// Retry and lookup schedules are outbox rows with a due time, so a restart
// neither loses nor hurries them. The LeaseSweeper moves expired claims to
// unknown and re-publishes operations whose message never arrived.
package dispatcher
