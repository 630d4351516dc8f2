package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/actledger/actledger/notify"
	"github.com/actledger/actledger/provider"
)

// notifyConcurrency is the notification worker's requests in flight to
// one receiver in the notify stage: the most the hanging receiver may
// hold.
const notifyConcurrency = 2

// notifyResult is one repetition of the notify stage: the same open loop
// on a pipeline without receivers and on one with a hanging and a
// healthy receiver of every settled operation.
type notifyResult struct {
	Offered float64
	// Without and With are enqueue → succeeded on each pipeline.
	Without, With               summary
	WithoutOps, WithOps         int
	Abandoned                   int // by either open loop
	HealthyMissing, HangingHeld int // operations the healthy receiver never heard; requests the hanging one held
}

// notifyConfig is the notification worker's config of a pipeline that
// runs one (nil: none).
func notifyConfig(c *notify.Config) notify.Config {
	if c == nil {
		return notify.Config{}
	}
	return *c
}

// receiver is a notification receiver on a loopback port that counts what
// it got: each distinct webhook-id, and the requests in flight. A hanging
// one answers nothing until release.
type receiver struct {
	srv      *http.Server
	url      string
	release  chan struct{}
	let      sync.Once
	mu       sync.Mutex
	ids      map[string]bool
	inFlight int
	held     int // most requests in flight at once
}

func startReceiver(hanging bool) (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("notification receiver: %w", err)
	}
	rc := &receiver{url: "http://" + ln.Addr().String(), release: make(chan struct{}), ids: map[string]bool{}}
	rc.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		rc.ids[r.Header.Get("webhook-id")] = true
		rc.inFlight++
		rc.held = max(rc.held, rc.inFlight)
		rc.mu.Unlock()
		defer func() {
			rc.mu.Lock()
			rc.inFlight--
			rc.mu.Unlock()
		}()
		if hanging {
			select {
			case <-rc.release:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = rc.srv.Serve(ln) }()
	return rc, nil
}

// heard is how many distinct events the receiver got, and the most
// requests it held at once.
func (rc *receiver) heard() (events, held int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.ids), rc.held
}

// letGo lets held requests go, and any later one through: the
// pipeline's stop waits for deliveries in flight.
func (rc *receiver) letGo() { rc.let.Do(func() { close(rc.release) }) }

// close lets held requests go and stops the server.
func (rc *receiver) close() {
	rc.letGo()
	_ = rc.srv.Close()
}

// benchNotify runs the notify stage pl.Reps times: a receiver that never
// answers must delay no operation and no other receiver
// (docs/benchmarks.md, "The notify stage").
func benchNotify(ctx context.Context, e *env, pl plan, res *results) error {
	return repeat(ctx, pl, "enqueue → succeeded with a hanging notification receiver", func() error {
		r, err := notifyStage(ctx, e, pl)
		if err == nil {
			res.Notify = append(res.Notify, r)
		}
		return err
	})
}

func notifyStage(ctx context.Context, e *env, pl plan) (notifyResult, error) {
	r := notifyResult{Offered: pl.NotifyRate}
	without, ops, abandoned, err := notifyLoop(ctx, e, pl, roles{})
	if err != nil {
		return r, fmt.Errorf("without receivers: %w", err)
	}
	r.Without, r.WithoutOps, r.Abandoned = without, ops, abandoned
	logf("  without receivers: p50 %.2f ms, p99 %.2f ms", ms(without.P50), ms(without.P99))

	hanging, err := startReceiver(true)
	if err != nil {
		return r, err
	}
	defer hanging.close()
	healthy, err := startReceiver(false)
	if err != nil {
		return r, err
	}
	defer healthy.close()
	key := make([]byte, 24)
	_, _ = rand.Read(key)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	text := e.supplier.yaml + "notifications:\n"
	for name, url := range map[string]string{"hanging": hanging.url, "healthy": healthy.url} {
		text += fmt.Sprintf("  %s:\n    url: %s\n    secret_env: BENCH_NOTIFY_SECRET\n    tenant: %q\n    events: [operation.settled]\n", name, url, benchTenant)
	}
	reg, err := provider.ParseEnv([]byte(text), func(string) string { return secret })
	if err != nil {
		return r, fmt.Errorf("providers file with receivers: %w", err)
	}
	// The hanging receiver's requests are held for the whole stage: each
	// attempt's timeout is longer than the stage.
	cfg := notify.Config{Timeout: 10 * time.Minute, Concurrency: notifyConcurrency, BackoffInitial: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond}
	with, ops, abandoned, err := notifyLoop(ctx, e, pl, roles{Notify: &cfg, Registry: reg}, func(ctx context.Context, ops int) error {
		deadline := time.Now().Add(pl.Settle)
		// The hanging receiver is let go once the healthy one has heard
		// everything (or the wait ran out), before the pipeline stops.
		defer hanging.letGo()
		for {
			events, _ := healthy.heard()
			if events >= ops {
				_, r.HangingHeld = hanging.heard()
				return nil
			}
			if time.Now().After(deadline) {
				r.HealthyMissing = ops - events
				_, r.HangingHeld = hanging.heard()
				return nil
			}
			if err := sleep(ctx, 10*time.Millisecond); err != nil {
				return err
			}
		}
	})
	if err != nil {
		return r, fmt.Errorf("with a hanging and a healthy receiver: %w", err)
	}
	r.With, r.WithOps, r.Abandoned = with, ops, r.Abandoned+abandoned
	logf("  with a hanging and a healthy receiver: p50 %.2f ms, p99 %.2f ms; the healthy one missed %d, the hanging one held %d",
		ms(with.P50), ms(with.P99), r.HealthyMissing, r.HangingHeld)
	return r, nil
}

// notifyLoop runs an open loop at pl.NotifyRate for pl.NotifyDuration on
// a new pipeline with the roles of rl (and the API, relay and dispatcher)
// and returns its enqueue → succeeded latencies, after then(ops sent),
// while the pipeline still runs.
func notifyLoop(ctx context.Context, e *env, pl plan, rl roles, then ...func(ctx context.Context, ops int) error) (summary, int, int, error) {
	rl.API, rl.Relay, rl.Dispatcher = true, true, true
	p, err := newPipeline(ctx, e, rl)
	if err != nil {
		return summary{}, 0, 0, err
	}
	defer p.close(ctx)
	clients, err := p.clients(ctx, pl.OpenLoopClients)
	if err != nil {
		return summary{}, 0, 0, err
	}
	warm, err := closedLoop(ctx, clients, loop{PerClient: max(pl.Warmup/len(clients), 1)})
	if err != nil {
		return summary{}, 0, 0, fmt.Errorf("warm-up: %w", err)
	}
	if _, err := p.waitSettled(ctx, pl.Settle); err != nil {
		return summary{}, 0, 0, fmt.Errorf("warm-up: %w", err)
	}
	t := newTracker()
	stop, err := p.watchLedger(ctx, t)
	if err != nil {
		return summary{}, 0, 0, err
	}
	ol, err := openLoop(ctx, clients, pl.NotifyRate, pl.NotifyDuration, pl.GiveUp, t.sent, t.inFlight)
	var lat latencies
	if err == nil {
		lat, err = t.wait(ctx, ol.Sent, pl.Settle)
	}
	stop()
	if err != nil {
		return summary{}, 0, 0, err
	}
	for _, f := range then {
		if err := f(ctx, warm.Ops+ol.Sent); err != nil {
			return summary{}, 0, 0, err
		}
	}
	return lat.summary(), ol.Sent, ol.Abandoned, nil
}

// notifyLines adds the notify stage's rows.
func notifyLines(add func(line), r *results) {
	if len(r.Notify) == 0 {
		return
	}
	n := r.Notify
	stage := fmt.Sprintf("enqueue → succeeded, %s/s, hanging receiver", thousands(n[0].Offered))
	add(line{id: "9", stage: stage, figure: "p50 ms, no receivers", vals: collect(n, func(x notifyResult) float64 { return ms(x.Without.P50) }), format: millis})
	withoutP99 := collect(n, func(x notifyResult) float64 { return ms(x.Without.P99) })
	add(line{figure: "p99 ms, no receivers", vals: withoutP99, format: millis})
	add(line{figure: "p50 ms, hanging + healthy", vals: collect(n, func(x notifyResult) float64 { return ms(x.With.P50) }), format: millis})
	withP99 := collect(n, func(x notifyResult) float64 { return ms(x.With.P99) })
	add(line{figure: "p99 ms, hanging + healthy", vals: withP99, format: millis,
		vs: ratio(median(withP99), median(withoutP99), "no receivers"), target: "≤ 2× no receivers + 100 ms",
		result: passIf(median(withP99) <= 2*median(withoutP99)+100)})
	missing := collect(n, func(x notifyResult) float64 { return float64(x.HealthyMissing) })
	add(line{figure: "healthy receiver: operations not heard", vals: missing, format: thousands, target: "0", result: passIf(sum(missing) == 0)})
	held := collect(n, func(x notifyResult) float64 { return float64(x.HangingHeld) })
	add(line{figure: "hanging receiver: requests held", vals: held, format: thousands,
		target: fmt.Sprintf("1 … %d (its concurrency)", notifyConcurrency), result: passIf(slicesMin(held) >= 1 && slicesMax(held) <= notifyConcurrency)})
	addAbandoned(add, collect(n, func(x notifyResult) float64 { return float64(x.Abandoned) }))
}

func slicesMax(vals []float64) float64 { return spreadOf(vals).Max }

func slicesMin(vals []float64) float64 { return spreadOf(vals).Min }
