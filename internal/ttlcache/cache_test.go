package ttlcache

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// key is a cache key, as auth keys its cache by a token's SHA-256.
func key(b byte) [32]byte { return [32]byte{b} }

// value is a cache value, unique to each call.
func value() uuid.UUID { return uuid.New() }

func newCache(ttl time.Duration, size int) *Cache[[32]byte, uuid.UUID] {
	return New[[32]byte, uuid.UUID](ttl, size)
}

// A full cache makes room by dropping its oldest entry, never by growing.
func TestAFullCacheDropsItsOldestEntry(t *testing.T) {
	t.Parallel()
	c := newCache(time.Minute, 2)
	for b := range byte(3) {
		_, _, gen := c.Get(key(b))
		c.Put(key(b), value(), gen)
	}
	if _, ok, _ := c.Get(key(0)); ok {
		t.Error("the oldest entry is still cached")
	}
	for b := byte(1); b < 3; b++ {
		if _, ok, _ := c.Get(key(b)); !ok {
			t.Errorf("entry %d was dropped", b)
		}
	}
	if len(c.entries) > 2 || len(c.order) > 2 {
		t.Errorf("%d entries, %d insertions; want at most 2", len(c.entries), len(c.order))
	}
}

// Expired entries are not served, and are dropped by the next put without
// waiting for the cache to fill.
func TestExpiredEntriesAreNotServedAndMakeRoom(t *testing.T) {
	t.Parallel()
	c := newCache(time.Millisecond, 100)
	now := time.Now()
	c.now = func() time.Time { return now }
	for b := range byte(10) {
		c.Put(key(b), value(), 0)
	}
	now = now.Add(time.Millisecond) // the entries' whole TTL
	if _, ok, _ := c.Get(key(0)); ok {
		t.Error("an expired entry was served")
	}
	c.Put(key(99), value(), 0)
	if len(c.entries) != 1 || len(c.order) != 1 {
		t.Errorf("%d entries, %d insertions after the others expired; want 1", len(c.entries), len(c.order))
	}
}

// A lookup that began before a revocation may have read the token before
// the revocation committed: its answer is not kept.
func TestALookupUnderWayDuringAnEvictionIsNotCached(t *testing.T) {
	t.Parallel()
	c := newCache(time.Minute, 10)
	_, _, gen := c.Get(key(1))
	c.Evict(key(1))
	c.Put(key(1), value(), gen)
	if _, ok, _ := c.Get(key(1)); ok {
		t.Error("a lookup begun before the eviction was cached")
	}
	_, _, gen = c.Get(key(1))
	c.Put(key(1), value(), gen)
	if _, ok, _ := c.Get(key(1)); !ok {
		t.Error("a lookup begun after the eviction was not cached")
	}
}

// A key put again (two lookups that missed at once) leaves one entry, and
// the stale insertion it leaves behind drops nothing when it comes due.
func TestAKeyPutTwiceKeepsItsNewestEntry(t *testing.T) {
	t.Parallel()
	c := newCache(time.Minute, 2)
	first, second := value(), value()
	c.Put(key(1), first, 0)
	c.Put(key(1), second, 0)
	if p, ok, _ := c.Get(key(1)); !ok || p != second {
		t.Errorf("got %v %v, want the newest value", p, ok)
	}
	if len(c.entries) != 1 {
		t.Errorf("%d entries, want 1", len(c.entries))
	}
	// The cache is full of insertions: the next put drops the stale one,
	// which must leave key 1's newer entry alone.
	c.Put(key(2), value(), 0)
	if _, ok, _ := c.Get(key(1)); !ok {
		t.Error("dropping a stale insertion dropped the newer entry")
	}
}

// Gets, puts and evictions from many goroutines (run with -race).
func TestTheCacheIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	c := newCache(time.Millisecond, 16)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				k := key(byte(g*31 + i))
				if _, ok, gen := c.Get(k); !ok {
					c.Put(k, value(), gen)
				}
				if i%7 == 0 {
					c.Evict(k)
				}
			}
		})
	}
	wg.Wait()
	if len(c.entries) > 16 || len(c.order) > 16 {
		t.Errorf("%d entries, %d insertions; want at most 16", len(c.entries), len(c.order))
	}
}
