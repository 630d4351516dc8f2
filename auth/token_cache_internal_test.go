package auth

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestConfigDefaultsAndValidation(t *testing.T) {
	t.Parallel()
	if got := (Config{}).withDefaults(); got.CacheTTL != DefaultCacheTTL || got.CacheSize != DefaultCacheSize {
		t.Errorf("Config{}.withDefaults() = %+v", got)
	}
	tests := []struct {
		cfg  Config
		want string // in the error; "" for none
	}{
		{Config{}, ""},
		{Config{CacheTTL: NoCache}, ""},
		{Config{CacheTTL: -time.Hour}, ""},
		{Config{CacheTTL: MaxCacheTTL}, ""},
		{Config{CacheTTL: MaxCacheTTL + time.Second}, "Config.CacheTTL"},
		{Config{CacheSize: -1}, "Config.CacheSize"},
	}
	for _, tt := range tests {
		err := tt.cfg.withDefaults().validate()
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("validate(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
}

func TestNewWithANegativeTTLKeepsNoCache(t *testing.T) {
	t.Parallel()
	tokens, err := New(nil, nil, Config{CacheTTL: NoCache})
	if err != nil {
		t.Fatal(err)
	}
	if tokens.cache != nil {
		t.Error("a cache with CacheTTL NoCache")
	}
}

func key(b byte) tokenHash { return tokenHash{b} }

func principal() Principal { return Principal{TokenID: uuid.New(), Role: RoleAgent} }

// A full cache makes room by dropping its oldest entry, never by growing.
func TestAFullCacheDropsItsOldestEntry(t *testing.T) {
	t.Parallel()
	c := newTokenCache(time.Minute, 2)
	for b := range byte(3) {
		_, _, gen := c.get(key(b))
		c.put(key(b), principal(), gen)
	}
	if _, ok, _ := c.get(key(0)); ok {
		t.Error("the oldest entry is still cached")
	}
	for b := byte(1); b < 3; b++ {
		if _, ok, _ := c.get(key(b)); !ok {
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
	c := newTokenCache(time.Millisecond, 100)
	now := time.Now()
	c.now = func() time.Time { return now }
	for b := range byte(10) {
		c.put(key(b), principal(), 0)
	}
	now = now.Add(time.Millisecond) // the entries' whole TTL
	if _, ok, _ := c.get(key(0)); ok {
		t.Error("an expired entry was served")
	}
	c.put(key(99), principal(), 0)
	if len(c.entries) != 1 || len(c.order) != 1 {
		t.Errorf("%d entries, %d insertions after the others expired; want 1", len(c.entries), len(c.order))
	}
}

// A lookup that began before a revocation may have read the token before
// the revocation committed: its answer is not kept.
func TestALookupUnderWayDuringAnEvictionIsNotCached(t *testing.T) {
	t.Parallel()
	c := newTokenCache(time.Minute, 10)
	_, _, gen := c.get(key(1))
	c.evict(key(1))
	c.put(key(1), principal(), gen)
	if _, ok, _ := c.get(key(1)); ok {
		t.Error("a lookup begun before the eviction was cached")
	}
	_, _, gen = c.get(key(1))
	c.put(key(1), principal(), gen)
	if _, ok, _ := c.get(key(1)); !ok {
		t.Error("a lookup begun after the eviction was not cached")
	}
}

// A key put again (two lookups that missed at once) leaves one entry, and
// the stale insertion it leaves behind drops nothing when it comes due.
func TestAKeyPutTwiceKeepsItsNewestEntry(t *testing.T) {
	t.Parallel()
	c := newTokenCache(time.Minute, 2)
	first, second := principal(), principal()
	c.put(key(1), first, 0)
	c.put(key(1), second, 0)
	if p, ok, _ := c.get(key(1)); !ok || p.TokenID != second.TokenID {
		t.Errorf("got %v %v, want the newest principal", p.TokenID, ok)
	}
	if len(c.entries) != 1 {
		t.Errorf("%d entries, want 1", len(c.entries))
	}
	// The cache is full of insertions: the next put drops the stale one,
	// which must leave key 1's newer entry alone.
	c.put(key(2), principal(), 0)
	if _, ok, _ := c.get(key(1)); !ok {
		t.Error("dropping a stale insertion dropped the newer entry")
	}
}

// Gets, puts and evictions from many goroutines (run with -race).
func TestTheCacheIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	c := newTokenCache(time.Millisecond, 16)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				k := key(byte(g*31 + i))
				if _, ok, gen := c.get(k); !ok {
					c.put(k, principal(), gen)
				}
				if i%7 == 0 {
					c.evict(k)
				}
			}
		})
	}
	wg.Wait()
	if len(c.entries) > 16 || len(c.order) > 16 {
		t.Errorf("%d entries, %d insertions; want at most 16", len(c.entries), len(c.order))
	}
}
