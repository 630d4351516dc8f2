// Package testproxy is a TCP proxy that tests cut and restore to simulate a
// backing service (Postgres, NATS) going away and coming back, without
// touching the real server other tests share. cmd/actchaos cuts Postgres
// with it outside a test.
package testproxy

import (
	"io"
	"net"
	"sync"
	"testing"
)

// TB is the part of testing.TB the proxy uses; cmd/actchaos, which runs a
// proxy outside a test, supplies its own.
type TB interface {
	Helper()
	Fatal(args ...any)
	Cleanup(func())
}

var _ TB = testing.TB(nil)

// Proxy forwards connections from a loopback port to a target address.
type Proxy struct {
	target string
	ln     net.Listener

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

// New starts a proxy to target and stops it when t ends: it closes its
// listener and every connection it forwards.
func New(t TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: target, ln: ln, conns: make(map[net.Conn]struct{})}
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
	})
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every open connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Restore accepts connections again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			client.Close()
			continue
		}
		p.mu.Unlock()
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client, server) {
			continue
		}
		go p.pipe(client, server)
		go p.pipe(server, client)
	}
}

func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies src to dst until either side ends, then closes both and
// forgets them, so a long run (cmd/actchaos) does not hold every
// connection it ever forwarded.
func (p *Proxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}
