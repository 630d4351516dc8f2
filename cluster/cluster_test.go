package cluster_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/testcluster"
)

// TestStreamLeaderKilledUnderLoadLosesNothing kills (SIGKILL) the node
// leading the dispatch stream while 2,000 operations flow through two
// dispatchers: the API accepts every one, each ends succeeded with exactly
// one order at the supplier, and all settle within the sweeper's bound of
// the load's end. The killed node comes back and catches up.
func TestStreamLeaderKilledUnderLoadLosesNothing(t *testing.T) {
	t.Parallel()
	const n, rate = 2000, 250
	c := testcluster.New(t)
	p, b := clusterPipeline(t, c)
	l := newLoad(p, "leader", n)

	wait := l.start(t, rate)
	l.waitAccepted(t, n/4, time.Minute)
	leader := c.StreamLeader(b.OpsStream(), 10*time.Second)
	c.Kill(leader)
	t.Logf("killed %s, the leader of %s, after %d accepted", leader.Name, b.OpsStream(), l.accepted.Load())
	wait()
	loadEnd := time.Now()

	waitAllSucceeded(t, p.Pool, n, stuckAfter+90*time.Second)
	t.Logf("all %d succeeded %s after the load ended; slowest operation %s", n, time.Since(loadEnd).Round(time.Millisecond), maxLatency(t, p.Pool))
	checkOneOrderEach(t, p.Pool, p.Supplier, n)

	c.Start(leader)
	info := c.WaitCurrent(b.OpsStream(), time.Minute)
	if info.State.Msgs < n {
		t.Fatalf("%s holds %d messages after the restart, want at least %d", b.OpsStream(), info.State.Msgs, n)
	}
}

// TestNodeRestartedWithWipedStoreReReplicates restarts one node with an
// empty store directory: the cluster copies the streams back to it, and
// with another original node then killed, the wiped node keeps the quorum
// and nothing published before is lost.
func TestNodeRestartedWithWipedStoreReReplicates(t *testing.T) {
	t.Parallel()
	const batch = 150
	c := testcluster.New(t)
	p, b := clusterPipeline(t, c)

	newLoad(p, "before", batch).start(t, 200)()
	waitAllSucceeded(t, p.Pool, batch, time.Minute)
	before := c.WaitCurrent(b.OpsStream(), time.Minute).State.Msgs

	// The leader is the hardest node to lose: its stream must elect anew.
	wiped := c.StreamLeader(b.OpsStream(), 10*time.Second)
	c.Kill(wiped)
	c.Wipe(wiped)
	newLoad(p, "down", batch).start(t, 200)()
	waitAllSucceeded(t, p.Pool, 2*batch, time.Minute)
	c.Start(wiped)
	for _, s := range []string{b.OpsStream(), b.EvidenceStream(), b.ReviewStream()} {
		c.WaitCurrent(s, time.Minute)
	}
	t.Logf("%s came back empty and is current on every stream", wiped.Name)

	// Kill an original node: the quorum is now the wiped node and one
	// original, so the stream works only if the wiped node holds its log.
	var other *testcluster.Node
	for _, nd := range c.Nodes {
		if nd != wiped {
			other = nd
			break
		}
	}
	c.Kill(other)
	newLoad(p, "after", batch).start(t, 200)()
	waitAllSucceeded(t, p.Pool, 3*batch, time.Minute)
	checkOneOrderEach(t, p.Pool, p.Supplier, 3*batch)
	info, err := c.StreamInfo(b.OpsStream())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs < before+2*batch {
		t.Fatalf("%s holds %d messages, want at least %d (%d before the wipe + %d since)", b.OpsStream(), info.State.Msgs, before+2*batch, before, 2*batch)
	}
}

// resumeBound is how soon after the whole cluster is back every waiting
// operation must be done: 200 of them usually take a few seconds, but a
// relay batch sent into the outage waits out its publish timeout (10 s)
// and then up to 5 s before the next, so with the test's neighbours
// loading the machine it took over 15 s once; consumers that waited out
// the client's default 30 s pull expiry took about 25 s more.
const resumeBound = 20 * time.Second

// TestWholeClusterDownAPIKeepsAccepting kills every node for 10 s while
// agents keep submitting: the API answers 201 to each (the operation and
// its outbox row are one Postgres transaction; NATS is not on that path),
// /readyz answers 503 naming nats, the outbox holds the dispatch messages,
// and once the cluster is back every operation completes with one order.
//
// It does not run in parallel with the other cluster tests: its bound on
// the resumption is a time, and a second cluster on two cores beside it
// (with the other packages of `make test`) stretched that beyond it.
func TestWholeClusterDownAPIKeepsAccepting(t *testing.T) {
	const before, during = 100, 200
	c := testcluster.New(t)
	p, b := clusterPipeline(t, c)

	newLoad(p, "up", before).start(t, 200)()
	waitAllSucceeded(t, p.Pool, before, time.Minute)

	down := newLoad(p, "down", during)
	for _, nd := range c.Nodes {
		c.Kill(nd)
	}
	outage := time.Now()
	// during requests over 10 s.
	down.start(t, during/10)()
	if status, out := p.Do("GET", "/readyz", "", ""); status != http.StatusServiceUnavailable {
		t.Errorf("/readyz with the whole cluster down: %d %v, want 503", status, out)
	} else {
		t.Logf("/readyz with the whole cluster down: %d %v", status, out)
	}
	if n := unpublished(t, p.Pool); n < during {
		t.Fatalf("%d outbox rows wait to be published while NATS is down, want at least %d", n, during)
	}
	t.Logf("NATS down %s: API accepted %d of %d; %d outbox rows wait", time.Since(outage).Round(time.Millisecond), down.accepted.Load(), during, unpublished(t, p.Pool))

	// The nodes come back one by one, as machines do: the first alone has
	// no quorum, so the clients reconnect to it and their consumers' pulls
	// reach a JetStream with no consumer leader, and are dropped.
	c.Start(c.Nodes[0])
	back := time.Now()
	p.Eventually(30*time.Second, "the broker's reconnect to "+c.Nodes[0].Name, b.Conn().IsConnected)
	time.Sleep(time.Second) // let the consumers send their pulls to it
	for _, nd := range c.Nodes[1:] {
		c.Start(nd)
	}
	c.WaitReady(time.Minute)
	ready := time.Now()
	// Bounded well below the JetStream client's default pull expiry (30 s):
	// a consumer whose pull was lost in the restart must pull again soon.
	waitAllSucceeded(t, p.Pool, before+during, resumeBound)
	t.Logf("all %d succeeded %s after the cluster came back, %s after every node had JetStream again",
		before+during, time.Since(back).Round(time.Millisecond), time.Since(ready).Round(time.Millisecond))
	checkOneOrderEach(t, p.Pool, p.Supplier, before+during)
	if n := unpublished(t, p.Pool); n != 0 {
		t.Fatalf("%d outbox rows still unpublished", n)
	}
}
