package api_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/api"
)

// TestTricklingWebhookBodyIsCutOffInSeconds: an unauthenticated client
// that sends a webhook's headers and then its body one byte a second is
// answered 408 and disconnected once ReadTimeout has passed, over a real
// TCP connection to the server `serve` builds; it used to hold the
// connection for as long as it kept trickling.
func TestTricklingWebhookBodyIsCutOffInSeconds(t *testing.T) {
	t.Parallel()
	f := setup(t, withWebhooks(webhookSecret))
	const readTimeout = 2 * time.Second
	srv := api.NewHTTPServer(f.srv.Config.Handler, api.HTTPLimits{ReadTimeout: readTimeout})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := webhookBody("evt_trickle")
	start := time.Now()
	fmt.Fprintf(conn, "POST /v1/webhooks/acme HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	sent := make(chan int, 1)
	go func() {
		n := 0
		for ; n < len(body); n++ {
			if _, err := conn.Write(body[n : n+1]); err != nil {
				break
			}
			time.Sleep(time.Second)
		}
		sent <- n
	}()

	// The client waits far longer than the server should: a bounded wait
	// for the server's answer, not a sleep.
	_ = conn.SetReadDeadline(time.Now().Add(readTimeout + 8*time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer after %s: %v (the server kept reading the trickle)", time.Since(start).Round(time.Millisecond), err)
	}
	res.Body.Close()
	elapsed := time.Since(start)
	if res.StatusCode != http.StatusRequestTimeout {
		t.Errorf("status %d, want 408", res.StatusCode)
	}
	if elapsed > readTimeout+3*time.Second {
		t.Errorf("cut off after %s, want within %s of ReadTimeout", elapsed.Round(time.Millisecond), 3*time.Second)
	}
	// The server closed the connection: the next read ends.
	if _, err := bufio.NewReader(conn).ReadByte(); err == nil {
		t.Error("connection still open after the timeout")
	}
	conn.Close()
	if n := <-sent; n >= len(body) {
		t.Errorf("the whole body (%d bytes) was accepted", n)
	}
	f.assertNothingStored(t)
}

// TestHTTPServerBoundsEveryPhaseByDefault: the server `serve` runs has a
// bound on headers, body, answer, idle connections and header size, with
// no configuration.
func TestHTTPServerBoundsEveryPhaseByDefault(t *testing.T) {
	t.Parallel()
	srv := api.NewHTTPServer(http.NotFoundHandler(), api.HTTPLimits{})
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.ReadTimeout > 30*time.Second ||
		srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 || srv.MaxHeaderBytes <= 0 || srv.MaxHeaderBytes > 1<<20 {
		t.Errorf("limits: header %s, read %s, write %s, idle %s, max header %d; want all set and bounded",
			srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
}

// TestStreamingRouteCanOutliveWriteTimeout: a route that extends its own
// write deadline answers after the server's WriteTimeout; one that does not
// is cut off.
func TestStreamingRouteCanOutliveWriteTimeout(t *testing.T) {
	t.Parallel()
	const writeTimeout = 300 * time.Millisecond
	mux := http.NewServeMux()
	slow := func(extend bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if extend {
				if err := api.ExtendWriteDeadline(w, 5*time.Second); err != nil {
					t.Error(err)
				}
			}
			select {
			case <-time.After(3 * writeTimeout):
			case <-r.Context().Done():
			}
			fmt.Fprint(w, "done")
		}
	}
	mux.Handle("/extended", slow(true))
	mux.Handle("/plain", slow(false))
	srv := api.NewHTTPServer(mux, api.HTTPLimits{WriteTimeout: writeTimeout})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for path, want := range map[string]bool{"/extended": true, "/plain": false} {
		res, err := client.Get("http://" + ln.Addr().String() + path)
		got := err == nil
		if err == nil {
			res.Body.Close()
		}
		if got != want {
			t.Errorf("%s answered: %v (err %v), want %v", path, got, err, want)
		}
	}
}

// TestReadyzNamesTheDependencyThatIsDownAndNoErrorText: /readyz is
// unauthenticated; it says which dependency is down and never the error's
// text, which names hosts and users.
func TestReadyzNamesTheDependencyThatIsDownAndNoErrorText(t *testing.T) {
	t.Parallel()
	// A real connection failure, whose text names the host and the user.
	dead, err := pgxpool.New(context.Background(), "postgres://readyz_secret_user@127.0.0.1:1/ledger?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dead.Close)
	if err := dead.Ping(context.Background()); err == nil || !strings.Contains(err.Error(), "readyz_secret_user") {
		t.Fatalf("the failure's text should name the user for this test to mean anything: %v", err)
	}
	f := setup(t, func(c *api.Config) {
		c.ReadyChecks = []api.ReadyCheck{
			{Name: "postgres", Check: dead.Ping},
			{Name: "nats", Check: func(context.Context) error { return nil }},
		}
	})
	r := f.do(t, "GET", "/readyz", "", nil)
	if r.status != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", r.status)
	}
	deps, _ := r.body["dependencies"].(map[string]any)
	if deps["postgres"] != "down" || deps["nats"] != "up" {
		t.Errorf("dependencies %v, want postgres down and nats up; answer %s", deps, r.raw)
	}
	for _, secret := range []string{"readyz_secret_user", "127.0.0.1", "ledger", "connect"} {
		if strings.Contains(r.raw, secret) {
			t.Errorf("answer %s reveals %q", r.raw, secret)
		}
	}

	up := setup(t)
	if r := up.do(t, "GET", "/readyz", "", nil); r.status != 200 || r.body["status"] != "ready" {
		t.Errorf("healthy: %d %s, want 200 ready", r.status, r.raw)
	}
}
