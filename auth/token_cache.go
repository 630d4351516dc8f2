package auth

import (
	"sync"
	"time"
)

// tokenHash is a token's SHA-256: the cache's key, so the cache holds no
// secret either.
type tokenHash [32]byte

// tokenCache remembers the principals of agent tokens that authenticated,
// for ttl each, at most size of them. Every entry lives for the same ttl,
// so the order of insertion is the order of expiry: a queue of insertions
// finds the expired entries, and the oldest when the cache is full,
// without scanning the map.
type tokenCache struct {
	ttl  time.Duration
	size int
	// now is the clock entries expire by: time.Now, or a test's.
	now func() time.Time

	mu      sync.Mutex
	entries map[tokenHash]cached
	// order holds one insertion per put, oldest first. An insertion whose
	// entry was replaced or evicted since is stale and skipped when it
	// reaches the front; stale ones count against size too, so order
	// bounds the map.
	order []insertion
	// generation moves with every eviction. A lookup that began before
	// an eviction may have read the token before its revocation
	// committed, so its answer is not kept (put compares generations).
	generation uint64
}

type cached struct {
	principal Principal
	expires   time.Time
}

type insertion struct {
	key     tokenHash
	expires time.Time
}

func newTokenCache(ttl time.Duration, size int) *tokenCache {
	return &tokenCache{ttl: ttl, size: size, now: time.Now, entries: make(map[tokenHash]cached)}
}

// get returns the principal cached for key while its entry lasts, and the
// generation a lookup that misses must hand to put.
func (c *tokenCache) get(key tokenHash) (Principal, bool, uint64) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !now.Before(e.expires) {
		return Principal{}, false, c.generation
	}
	return e.principal, true, c.generation
}

// put caches p under key for the ttl, unless an eviction happened since
// the lookup that found p began (generation).
func (c *tokenCache) put(key tokenHash, p Principal, generation uint64) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if generation != c.generation {
		return
	}
	for len(c.order) > 0 && (len(c.order) >= c.size || !now.Before(c.order[0].expires)) {
		c.dropOldest()
	}
	expires := now.Add(c.ttl)
	c.entries[key] = cached{principal: p, expires: expires}
	c.order = append(c.order, insertion{key: key, expires: expires})
}

// dropOldest removes the front insertion, and its entry unless a later
// put replaced it. The caller holds mu.
func (c *tokenCache) dropOldest() {
	in := c.order[0]
	c.order = c.order[1:]
	if e, ok := c.entries[in.key]; ok && e.expires.Equal(in.expires) {
		delete(c.entries, in.key)
	}
}

// evict forgets key at once, and keeps out the answers of lookups already
// under way.
func (c *tokenCache) evict(key tokenHash) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.generation++
	delete(c.entries, key)
}

// clear forgets every entry, and keeps out the answers of lookups already
// under way.
func (c *tokenCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.generation++
	clear(c.entries)
	c.order = nil
}
