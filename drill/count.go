package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/actledger/actledger/provider"
)

// listMargin widens the window a statement is listed for on both sides: the supplier's clock
// is not the drill's.
const listMargin = 10 * time.Minute

// tally is what the supplier holds for one external key, as its own records say.
type tally struct {
	// n is nil when the count could not be established.
	n *int
	// references are the supplier's own ids of the effects.
	references []string
	// how says what counted them ("reconcile.list", "lookup").
	how string
	// mismatched counts the records reconcile.match refused (other params than approved).
	mismatched int
	// problem says why the count is not established.
	problem string
}

// counter counts the effects of a provider at its supplier, through a client of its own that
// no fault touches.
type counter struct {
	pc      *provider.Config
	http    *provider.HTTP
	started time.Time
	faults  *faults
	// patience bounds a wait for the lookup's lag.
	patience time.Duration
	wait     func(ctx context.Context, d time.Duration, why string) error
}

// method says how the effects are counted; "" when they cannot be. Of a lookup and a statement
// the one whose declared lag is shorter is asked (the statement when they are equal: it lists
// every record, so an effect made twice shows twice).
func (c *counter) method() string {
	list, look := c.pc.Reconcile != nil, c.pc.Lookup != nil
	switch {
	case list && look && c.pc.Reconcile.Lag <= c.pc.Lookup.VisibilityLag.Duration, list && !look:
		return "reconcile.list"
	case look:
		return "lookup"
	}
	return ""
}

// lag is how long after a create landed the method's answer may still miss it: the lookup's
// visibility_lag, or reconcile.lag for the statement, as the providers file declares them.
func (c *counter) lag() (time.Duration, string) {
	if c.method() == "lookup" {
		return c.pc.Lookup.VisibilityLag.Duration, "the lookup's visibility_lag"
	}
	return c.pc.Reconcile.Lag, "reconcile.lag"
}

// count counts key's effects, once the supplier's records may be believed complete: the declared
// lag of the method after the latest moment a create of key may have landed (its answer, or, for
// one never answered, the end of its timeout). Asked sooner, a lagging list or search could miss
// a second effect and report a pass it did not observe.
func (c *counter) count(ctx context.Context, key string, params json.RawMessage) tally {
	method := c.method()
	if method == "" {
		return tally{problem: "the provider has neither a lookup nor a reconcile.list section, so nothing can ask the supplier what it holds"}
	}
	st := c.faults.stats(key)
	landed := st.lastAnswer
	if st.sent > st.answered {
		landed = st.lastSent.Add(c.pc.Timeout.Duration)
	}
	lag, what := c.lag()
	if d := time.Until(landed.Add(lag)); !landed.IsZero() && d > 0 {
		if d > c.patience {
			return tally{problem: fmt.Sprintf("%s (%s) is longer than --patience (%s), so the count would not be final: raise --patience above it", what, lag, c.patience)}
		}
		if err := c.wait(ctx, d, fmt.Sprintf("%s (%s) after the last create landed, so that the count is final", what, lag)); err != nil {
			return tally{problem: err.Error()}
		}
	}
	if method == "lookup" {
		return c.lookup(ctx, key, params)
	}
	return c.list(ctx, key, params)
}

func (c *counter) list(ctx context.Context, key string, params json.RawMessage) tally {
	t := tally{how: "reconcile.list"}
	since, until := c.started.Add(-listMargin), time.Now().Add(listMargin)
	var cursor *provider.StatementCursor
	for page := 0; ; page++ {
		if page >= c.pc.Reconcile.MaxPages {
			t.problem = fmt.Sprintf("the statement has more than list.max_pages (%d) pages for the drill's window; raise it", c.pc.Reconcile.MaxPages)
			return t
		}
		p, err := c.http.ListPage(ctx, since, until, cursor)
		if err != nil {
			t.problem = "the supplier's statement could not be read: " + err.Error()
			return t
		}
		for _, rec := range p.Records {
			if rec.Skip != "" && strings.Contains(string(rec.Raw), key) {
				// A record that names the key but that the reconcile expressions cannot read
				// may be an effect of ours: the count would be a guess.
				t.problem = fmt.Sprintf("a record of the supplier's statement names %s but cannot be read (%s)", key, rec.Skip)
				return t
			}
			if rec.Reference != key {
				continue
			}
			t.references = append(t.references, rec.ProviderReference)
			if c.pc.Reconcile.Condition != "" {
				if ok, err := c.pc.Reconcile.Match(rec, params); err != nil || !ok {
					t.mismatched++
				}
			}
		}
		if p.Next == nil {
			break
		}
		cursor = p.Next
	}
	n := len(t.references)
	t.n = &n
	return t
}

func (c *counter) lookup(ctx context.Context, key string, params json.RawMessage) tally {
	t := tally{how: "lookup"}
	r := c.http.Lookup(ctx, provider.LookupRequest{ExternalKey: key, Params: params})
	var n int
	switch r.Status {
	case provider.LookupFound:
		n, t.references = 1, []string{r.ProviderReference}
	case provider.LookupDuplicate:
		n, t.references = len(r.References), r.References
	case provider.LookupAbsent:
		n = 0
	default:
		t.problem = "the supplier's lookup failed: " + r.Error
		return t
	}
	t.n = &n
	return t
}
