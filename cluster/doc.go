// Package cluster holds the tests that run actledger against a real
// three-node NATS JetStream cluster (internal/testcluster) and real
// Postgres, and kill its parts: the stream leader under load, a node with
// its store wiped, the whole cluster, an actledger process mid-call. It
// has no code of its own; see docs/reliability.md for what the tests prove.
package cluster
