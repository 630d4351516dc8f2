package drill

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/ledger"
)

// faultKind is what happens to the supplier's answer of one create.
type faultKind int

const (
	// faultDrop: the supplier answers, the answer is lost on the way back, as a connection
	// that breaks after the supplier committed.
	faultDrop faultKind = iota + 1
	// faultError500: the supplier answers, the answer is replaced by a 500.
	faultError500
	// faultHold: the supplier answers, the answer is held until the call gives up (its
	// context ends) and at least until fault.until, and then lost: an answer that arrives
	// after the caller stopped waiting.
	faultHold
	// faultStall: the supplier answers, the answer is held until the drill releases it,
	// whatever the call's context says: the worker that sent it has stalled, as a paused or
	// partitioned process does, and its lease runs out under it.
	faultStall
)

// fault is the fault armed for the next create of one external key.
type fault struct {
	kind  faultKind
	until time.Time
}

// errAnswerLost is what the provider client sees when the drill dropped an answer.
var errAnswerLost = errors.New("connection lost after the request was sent (fault injected by actledger drill)")

// keyState is what the fault transport knows of one watched external key.
type keyState struct {
	next *fault
	// emptyFor > 0: a lookup of the key within emptyFor of the supplier's first answer
	// to a create is answered "none" (404).
	emptyFor time.Duration
	// sent counts the create requests of the key that left actledger; answered those the
	// supplier answered.
	sent, answered int
	firstAnswer    time.Time
	lastAnswer     time.Time
	lastSent       time.Time
	lookups        int
	emptied        int
	lastEmptied    time.Time
	// sentAfterEmpty counts creates sent after a lookup was answered "none".
	sentAfterEmpty int
	// took: this key took the fault armed for the next new key.
	took bool
	// stalled is closed when a stalled answer is being held; release ends the hold.
	stalled chan struct{}
	release chan struct{}
}

// faults is the RoundTripper the drill puts between actledger's provider clients and the
// suppliers (provider.HTTPOptions.Wrap). Every request goes to the supplier and is answered
// there; a fault acts on the answer only. A request is an operation's when its URL, a header
// value or its body carries the operation's external key (ledger.ExternalKey's form); a create
// is any request whose method is not GET (lookups and statement pages are GETs).
//
// A fault is armed for the next operation (armNext) before the operation is requested, and
// taken by the first create of an external key the transport has not seen before: a worker
// may send the operation before its POST has even answered, and the scenarios run one at a
// time, so the next new key is the scenario's.
type faults struct {
	mu        sync.Mutex
	keys      map[string]*keyState
	pending   *keyState // the next new key's fault and lookup rule, from armNext
	sentTotal int
	closed    chan struct{}
	closeOnce sync.Once
}

// externalKeyPattern matches an external key wherever a request carries it.
var externalKeyPattern = regexp.MustCompile(regexp.QuoteMeta(strings.TrimSuffix(ledger.ExternalKeyOfID(uuid.Nil), uuid.Nil.String())) +
	`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

func newFaults() *faults {
	return &faults{keys: make(map[string]*keyState), closed: make(chan struct{})}
}

// close ends every hold, so that no worker waits on the drill after it ended.
func (f *faults) close() { f.closeOnce.Do(func() { close(f.closed) }) }

// wrap is the provider.HTTPOptions.Wrap of every provider the drill runs.
func (f *faults) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper{f: f, next: next}
}

// watch is key's state, made if the transport has not seen key yet: key is then the next new
// operation's, and takes the fault armed for it.
func (f *faults) watch(key string) *keyState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state(key, true)
}

// state is key's state under f.mu, made if it is new; a new key takes the armed fault when
// take is true (a create, or the drill naming the operation it just requested).
func (f *faults) state(key string, take bool) *keyState {
	ks, ok := f.keys[key]
	if !ok {
		ks = &keyState{stalled: make(chan struct{}), release: make(chan struct{})}
		if take && f.pending != nil {
			ks.next, ks.emptyFor, ks.took = f.pending.next, f.pending.emptyFor, true
			f.pending = nil
		}
		f.keys[key] = ks
	}
	return ks
}

// armNext sets the fault of the first create of the next new external key, and with emptyFor
// > 0 answers that key's lookups within emptyFor of the supplier's first answer "none".
func (f *faults) armNext(ft fault, emptyFor time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending = &keyState{next: &ft, emptyFor: emptyFor}
}

// disarm drops a fault armed for the next key that no key took; it reports whether one was left.
func (f *faults) disarm() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	left := f.pending != nil
	f.pending = nil
	return left
}

// armed reports whether key took a fault armed by armNext.
func (f *faults) armed(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	ks, ok := f.keys[key]
	return ok && ks.took
}

// stats is a copy of what is known of key.
func (f *faults) stats(key string) keyState {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ks, ok := f.keys[key]; ok {
		return *ks
	}
	return keyState{}
}

// totalSent counts every create request sent to any supplier.
func (f *faults) totalSent() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sentTotal
}

// releaseStall lets a stalled answer of key through.
func (f *faults) releaseStall(key string) {
	ks := f.watch(key)
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-ks.release:
	default:
		close(ks.release)
	}
}

type roundTripper struct {
	f    *faults
	next http.RoundTripper
}

func (rt roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	f := rt.f
	var raw []byte
	if req.Body != nil {
		var err error
		raw, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	out := *req // a shallow copy: a RoundTripper must not change the request it was given
	if req.Body != nil {
		out.Body = io.NopCloser(bytes.NewReader(raw))
	}
	create := req.Method != http.MethodGet
	f.mu.Lock()
	ks := f.match(req, raw, create)
	if create {
		f.sentTotal++
		if ks != nil {
			ks.sent++
			ks.lastSent = time.Now()
			if !ks.lastEmptied.IsZero() {
				ks.sentAfterEmpty++
			}
		}
	}
	f.mu.Unlock()

	res, err := rt.next.RoundTrip(&out)
	if err != nil || ks == nil {
		return res, err
	}
	if !create {
		return f.looked(ks, req, res), nil
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	f.mu.Lock()
	ks.answered++
	ks.lastAnswer = time.Now()
	if ks.firstAnswer.IsZero() {
		ks.firstAnswer = ks.lastAnswer
	}
	ft := ks.next
	ks.next = nil
	f.mu.Unlock()
	if ft == nil {
		return res, nil
	}
	switch ft.kind {
	case faultDrop:
		return nil, errAnswerLost
	case faultError500:
		return answer(req, http.StatusInternalServerError, `{"error":"internal error (answer replaced by actledger drill after the supplier answered)"}`), nil
	case faultHold:
		select {
		case <-req.Context().Done():
		case <-f.closed:
		}
		if d := time.Until(ft.until); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-f.closed:
			}
			t.Stop()
		}
		return nil, errors.Join(errAnswerLost, req.Context().Err())
	case faultStall:
		f.mu.Lock()
		select {
		case <-ks.stalled:
		default:
			close(ks.stalled)
		}
		f.mu.Unlock()
		select {
		case <-ks.release:
		case <-f.closed:
		}
		return res, nil
	}
	return res, nil
}

// looked counts a lookup (or statement page) of ks and answers it "none" while the fault says so.
func (f *faults) looked(ks *keyState, req *http.Request, res *http.Response) *http.Response {
	f.mu.Lock()
	defer f.mu.Unlock()
	ks.lookups++
	if ks.emptyFor <= 0 || ks.firstAnswer.IsZero() || time.Since(ks.firstAnswer) >= ks.emptyFor {
		return res
	}
	ks.emptied++
	ks.lastEmptied = time.Now()
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return answer(req, http.StatusNotFound, `{"error":"not found (answer replaced by actledger drill: inside the visibility lag)"}`)
}

// match finds the key req carries, under f.mu: a key seen for the first time in a create takes
// the fault armed for the next new key.
func (f *faults) match(req *http.Request, body []byte, create bool) *keyState {
	var b strings.Builder
	b.WriteString(req.URL.String())
	b.WriteByte('\n')
	for _, vs := range req.Header {
		for _, v := range vs {
			b.WriteString(v)
			b.WriteByte('\n')
		}
	}
	b.Write(body)
	key := externalKeyPattern.FindString(b.String())
	if key == "" {
		return nil
	}
	return f.state(key, create)
}

// answer is a synthetic JSON answer to req.
func answer(req *http.Request, status int, body string) *http.Response {
	return &http.Response{
		Status:        strconv.Itoa(status) + " " + http.StatusText(status),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// stalledOn waits until the create of key is being held by a stall, or ctx ends.
func (f *faults) stalledOn(ctx context.Context, key string) error {
	ks := f.watch(key)
	select {
	case <-ks.stalled:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
