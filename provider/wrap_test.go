package provider

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
)

// roundTripperFunc lets a test write a wrapper as a function.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// withWrap rebuilds p with HTTPOptions.Wrap set to wrap.
func withWrap(p *HTTP, wrap func(http.RoundTripper) http.RoundTripper) *HTTP {
	return NewHTTP(p.cfg, HTTPOptions{Wrap: wrap})
}

func TestAWrapThatLosesTheSuppliersAnswerMakesTheCreateUnknownAndSent(t *testing.T) {
	t.Parallel()
	p, s := setup(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		_, _ = io.WriteString(w, `{"id":"ord_1"}`)
	}, nil)
	p = withWrap(p, func(next http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			res, err := next.RoundTrip(r)
			if err != nil {
				return nil, err
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			return nil, errors.New("answer lost")
		})
	})
	res := p.Create(context.Background(), CreateRequest{ExternalKey: "k1", Params: []byte(`{"sku":"A"}`)})
	if res.Class != ClassUnknown || !res.Sent {
		t.Errorf("class %s, sent %t; want unknown and sent (the supplier got it: %d arrivals)", res.Class, res.Sent, len(s.arrivals()))
	}
	if n := len(s.arrivals()); n != 1 {
		t.Errorf("%d arrivals at the supplier, want 1", n)
	}
}

func TestAWrapThatSendsNothingLeavesTheCreateNotExecuted(t *testing.T) {
	t.Parallel()
	p, s := setup(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		_, _ = io.WriteString(w, `{"id":"ord_1"}`)
	}, nil)
	p = withWrap(p, func(http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("refused here") })
	})
	res := p.Create(context.Background(), CreateRequest{ExternalKey: "k1", Params: []byte(`{"sku":"A"}`)})
	if res.Class != ClassNotExecuted || res.Sent {
		t.Errorf("class %s, sent %t; want not_executed and not sent", res.Class, res.Sent)
	}
	if n := len(s.arrivals()); n != 0 {
		t.Errorf("%d arrivals at the supplier, want 0", n)
	}
}
