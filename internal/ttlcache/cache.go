package ttlcache

import (
	"sync"
	"time"
)

// Cache remembers values for ttl each, at most size of them. Every entry
// lives for the same ttl, so the order of insertion is the order of
// expiry: a queue of insertions finds the expired entries, and the oldest
// when the cache is full, without scanning the map.
type Cache[K comparable, V any] struct {
	ttl  time.Duration
	size int
	// now is the clock entries expire by: time.Now, or a test's.
	now func() time.Time

	mu      sync.Mutex
	entries map[K]entry[V]
	// order holds one insertion per Put, oldest first. An insertion whose
	// entry was replaced or evicted since is stale and skipped when it
	// reaches the front; stale ones count against size too, so order
	// bounds the map.
	order []insertion[K]
	// generation moves with every eviction. A lookup that began before
	// an eviction may have read a value the eviction was about, so its
	// answer is not kept (Put compares generations).
	generation Generation
}

// Generation is the cache's count of evictions when a lookup began: Get
// returns it, and Put keeps a value only if it has not moved since.
type Generation uint64

type entry[V any] struct {
	value   V
	expires time.Time
}

type insertion[K comparable] struct {
	key     K
	expires time.Time
}

// New returns an empty cache of at most size entries, each kept for ttl.
func New[K comparable, V any](ttl time.Duration, size int) *Cache[K, V] {
	return &Cache[K, V]{ttl: ttl, size: size, now: time.Now, entries: make(map[K]entry[V])}
}

// Get returns the value cached for key while its entry lasts, and the
// generation a lookup that misses must hand to Put.
func (c *Cache[K, V]) Get(key K) (V, bool, Generation) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false, c.generation
	}
	return e.value, true, c.generation
}

// Put caches v under key for the ttl, unless an eviction happened since
// the lookup that found v began (generation).
func (c *Cache[K, V]) Put(key K, v V, generation Generation) {
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
	c.entries[key] = entry[V]{value: v, expires: expires}
	c.order = append(c.order, insertion[K]{key: key, expires: expires})
}

// dropOldest removes the front insertion, and its entry unless a later
// Put replaced it. The caller holds mu.
func (c *Cache[K, V]) dropOldest() {
	in := c.order[0]
	c.order = c.order[1:]
	if e, ok := c.entries[in.key]; ok && e.expires.Equal(in.expires) {
		delete(c.entries, in.key)
	}
}

// Evict forgets key at once, and keeps out the answers of lookups already
// under way.
func (c *Cache[K, V]) Evict(key K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.generation++
	delete(c.entries, key)
}

// Clear forgets every entry, and keeps out the answers of lookups already
// under way.
func (c *Cache[K, V]) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.generation++
	clear(c.entries)
	c.order = nil
}
