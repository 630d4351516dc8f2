// Package ttlcache is a bounded cache whose entries all live for one TTL,
// and which keeps out the answer of a lookup that began before an
// eviction: the agent-token cache of auth, where a token revoked while
// its lookup was under way must not be cached as valid.
package ttlcache
