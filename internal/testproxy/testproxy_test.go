package testproxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/testpoll"
)

// echo serves TCP on a loopback port, writing back every line it reads,
// until t ends; it returns the address.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// conn is one client connection through the proxy.
type conn struct {
	net.Conn
	r *bufio.Reader
}

func dial(addr string) (*conn, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c, r: bufio.NewReader(c)}, nil
}

// ping sends a line and reads it back; an error says the connection does
// not carry traffic (closed by the proxy, or refused).
func (c *conn) ping() error {
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return err
	}
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return err
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return fmt.Errorf("read back %q", line)
	}
	return nil
}

// pingNew dials addr afresh and pings once.
func pingNew(addr string) error {
	c, err := dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.ping()
}

// A cut closes the connections open through the proxy and refuses new
// ones until Restore; then traffic flows again, and a second cut is a cut
// again.
func TestCutClosesOpenConnectionsAndRefusesNewOnesUntilRestore(t *testing.T) {
	t.Parallel()
	p := New(t, echo(t))
	for round := range 2 {
		open, err := dial(p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer open.Close()
		if err := open.ping(); err != nil {
			t.Fatalf("round %d: before the cut: %v", round, err)
		}
		p.Cut()
		if err := open.ping(); err == nil {
			t.Errorf("round %d: a connection open before the cut still carries traffic", round)
		}
		if err := pingNew(p.Addr()); err == nil {
			t.Errorf("round %d: a connection made during the cut carries traffic", round)
		}
		p.Restore()
		if err := pingNew(p.Addr()); err != nil {
			t.Errorf("round %d: after Restore: %v", round, err)
		}
	}
}

// outsideTest is a TB that is not a testing.TB, as cmd/actchaos's is: its
// cleanups run, newest first, when close is called.
type outsideTest struct {
	cleanups []func()
	fatal    []string
}

func (o *outsideTest) Helper()           {}
func (o *outsideTest) Fatal(args ...any) { o.fatal = append(o.fatal, fmt.Sprint(args...)) }
func (o *outsideTest) Cleanup(f func())  { o.cleanups = append(o.cleanups, f) }
func (o *outsideTest) close() {
	for _, f := range slices.Backward(o.cleanups) {
		f()
	}
}

// A proxy made outside a test forwards like any other and stops with its
// TB's cleanup: the open connections close and the port no longer
// accepts.
func TestAProxyOutsideATestStopsAtItsCleanup(t *testing.T) {
	t.Parallel()
	o := &outsideTest{}
	p := New(o, echo(t))
	open, err := dial(p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if err := open.ping(); err != nil {
		t.Fatal(err)
	}
	o.close()
	if len(o.fatal) > 0 {
		t.Fatalf("New failed: %v", o.fatal)
	}
	if err := open.ping(); err == nil {
		t.Error("a connection still carries traffic after the cleanup")
	}
	var opErr *net.OpError
	if _, err := dial(p.Addr()); !errors.As(err, &opErr) {
		t.Errorf("dial after the cleanup: %v, want the port refused", err)
	}
}

// A connection that ends is forgotten: the proxy holds only the ones open.
func TestAClosedConnectionIsForgotten(t *testing.T) {
	t.Parallel()
	p := New(t, echo(t))
	for range 3 {
		if err := pingNew(p.Addr()); err != nil {
			t.Fatal(err)
		}
	}
	testpoll.Until(t, 5*time.Second, func() error {
		p.mu.Lock()
		n := len(p.conns)
		p.mu.Unlock()
		if n != 0 {
			return fmt.Errorf("%d connections held after every client closed, want 0", n)
		}
		return nil
	})
}
