package webhook

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var (
	secretOld = []byte("whsec_old_0123456789")
	secretNew = []byte("whsec_new_9876543210")
	body      = []byte(`{"event_id":"evt_1","type":"order.created","reference":"op_1","provider_reference":"ord_1","status":"succeeded"}`)
	now       = time.Unix(1_750_000_000, 0)
)

func TestSignedWebhookVerifies(t *testing.T) {
	t.Parallel()
	header := Sign(secretNew, now, body)
	if !strings.HasPrefix(header, "t=1750000000,v1=") || len(header) != len("t=1750000000,v1=")+64 {
		t.Errorf("Sign = %q, want t=<unix>,v1=<64 hex>", header)
	}
	if err := Verify(header, body, [][]byte{secretNew}, now, DefaultTolerance); err != nil {
		t.Errorf("Verify(Sign(...)) = %v, want nil", err)
	}
}

func TestVerifyRejects(t *testing.T) {
	t.Parallel()
	signed := Sign(secretOld, now, body)
	tests := []struct {
		name      string
		header    string
		body      []byte
		secrets   [][]byte
		now       time.Time
		tolerance time.Duration
		want      error
	}{
		{name: "wrong secret", header: signed, body: body, secrets: [][]byte{secretNew}, now: now, want: ErrMismatch},
		{name: "tampered body", header: signed, body: []byte(strings.Replace(string(body), "succeeded", "failed", 1)), secrets: [][]byte{secretOld}, now: now, want: ErrMismatch},
		{name: "body with extra byte", header: signed, body: append(append([]byte(nil), body...), ' '), secrets: [][]byte{secretOld}, now: now, want: ErrMismatch},
		{name: "timestamp altered", header: strings.Replace(signed, "t=1750000000", "t=1750000001", 1), body: body, secrets: [][]byte{secretOld}, now: now, want: ErrMismatch},
		{name: "301 s old", header: signed, body: body, secrets: [][]byte{secretOld}, now: now.Add(301 * time.Second), want: ErrStale},
		{name: "301 s in the future", header: signed, body: body, secrets: [][]byte{secretOld}, now: now.Add(-301 * time.Second), want: ErrStale},
		{name: "outside a custom tolerance", header: signed, body: body, secrets: [][]byte{secretOld}, now: now.Add(11 * time.Second), tolerance: 10 * time.Second, want: ErrStale},
		{name: "no secrets", header: signed, body: body, secrets: nil, now: now, want: ErrNoSecret},
		{name: "only empty secrets", header: signed, body: body, secrets: [][]byte{{}, nil}, now: now, want: ErrNoSecret},
		{name: "signed with an empty secret", header: Sign(nil, now, body), body: body, secrets: [][]byte{{}, secretOld}, now: now, want: ErrMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Verify(tt.header, tt.body, tt.secrets, tt.now, tt.tolerance)
			if !errors.Is(err, tt.want) {
				t.Errorf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestVerifyAcceptsTheEdgeOfTolerance(t *testing.T) {
	t.Parallel()
	header := Sign(secretOld, now, body)
	for _, at := range []time.Time{now.Add(300 * time.Second), now.Add(-300 * time.Second)} {
		if err := Verify(header, body, [][]byte{secretOld}, at, 0); err != nil {
			t.Errorf("Verify at %+v from signing = %v, want nil (300 s is inside the default tolerance)", at.Sub(now), err)
		}
	}
}

func TestRotatedSecretsAreAcceptedOnBothSides(t *testing.T) {
	t.Parallel()
	sigOld := Sign(secretOld, now, body)
	sigNew := Sign(secretNew, now, body)
	v1New := sigNew[strings.Index(sigNew, "v1="):]
	tests := []struct {
		name    string
		header  string
		secrets [][]byte
	}{
		{"we hold new and old, supplier signs with old", sigOld, [][]byte{secretNew, secretOld}},
		{"we hold new and old, supplier signs with new", sigNew, [][]byte{secretNew, secretOld}},
		{"supplier sends both v1 entries, we hold only new", sigOld + "," + v1New, [][]byte{secretNew}},
		{"supplier sends both v1 entries, we hold only old", sigOld + "," + v1New, [][]byte{secretOld}},
		{"spaces and an unknown scheme are tolerated", " v0=abc , " + strings.ReplaceAll(sigOld, ",", " , "), [][]byte{secretOld}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := Verify(tt.header, body, tt.secrets, now, DefaultTolerance); err != nil {
				t.Errorf("Verify(%q) = %v, want nil", tt.header, err)
			}
		})
	}
}

func TestMalformedHeadersAreRejected(t *testing.T) {
	t.Parallel()
	v1 := "v1=" + strings.Repeat("ab", 32)
	tests := []struct{ name, header string }{
		{"empty", ""},
		{"garbage", "sha256=deadbeef"},
		{"no timestamp", v1},
		{"no signature", "t=1750000000"},
		{"only other schemes", "t=1750000000,v0=" + strings.Repeat("ab", 32)},
		{"two timestamps", "t=1750000000,t=1750000001," + v1},
		{"negative timestamp", "t=-1," + v1},
		{"signed timestamp", "t=+1750000000," + v1},
		{"fractional timestamp", "t=1750000000.5," + v1},
		{"empty timestamp", "t=," + v1},
		{"overflowing timestamp", "t=99999999999999999999," + v1},
		{"hex timestamp", "t=0x10," + v1},
		{"short signature", "t=1750000000,v1=abcd"},
		{"non-hex signature", "t=1750000000,v1=" + strings.Repeat("zz", 32)},
		{"empty signature", "t=1750000000,v1="},
		{"element without =", "t=1750000000," + v1 + ",junk"},
		{"empty element", "t=1750000000,," + v1},
		{"empty key", "t=1750000000,=x," + v1},
		{"semicolon separated", "t=1750000000;" + v1},
		{"huge header", "t=1750000000," + strings.Repeat(v1+",", 100)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Verify(tt.header, body, [][]byte{secretOld}, now, DefaultTolerance)
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("Verify(%q) = %v, want ErrMalformed", tt.header, err)
			}
		})
	}
}

func TestErrorsNeverCarryTheSecretOrExpectedSignature(t *testing.T) {
	t.Parallel()
	expected := Sign(secretOld, now, body)
	tampered := strings.Replace(expected, "t=", "t=1", 1) // changes t, so the expected MAC differs
	for _, h := range []string{tampered, "t=1," + expected[strings.Index(expected, "v1="):]} {
		err := Verify(h, body, [][]byte{secretOld}, now, DefaultTolerance)
		if err == nil {
			t.Fatalf("Verify(%q) = nil", h)
		}
		if msg := err.Error(); strings.Contains(msg, string(secretOld)) || strings.Contains(msg, expected[len("t=1750000000,v1="):]) {
			t.Errorf("error %q leaks the secret or the expected signature", msg)
		}
	}
}

func FuzzVerify(f *testing.F) {
	f.Add(Sign(secretOld, now, body), body, int64(0))
	f.Add("t=1750000000,v1="+strings.Repeat("0", 64), []byte("{}"), int64(300))
	f.Add("t=,v1=,v1", []byte(nil), int64(-1))
	f.Add("t=99999999999999999999,v1=zz", []byte("x"), int64(1<<62))
	f.Add(" , = ,t=1,,", []byte("\x00"), int64(-1<<63))
	f.Fuzz(func(t *testing.T, header string, payload []byte, offset int64) {
		at := now.Add(time.Duration(offset))
		// Arbitrary input must never panic, must fail only with one of the sentinels, and may
		// verify only because of the secret: the same input under another secret must not.
		err := Verify(header, payload, [][]byte{secretOld}, at, DefaultTolerance)
		switch {
		case err == nil:
			if other := Verify(header, payload, [][]byte{[]byte("another secret")}, at, DefaultTolerance); !errors.Is(other, ErrMismatch) {
				t.Fatalf("header %q verified, and under another secret gave %v, want ErrMismatch", header, other)
			}
		case !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrMismatch) && !errors.Is(err, ErrStale):
			t.Fatalf("Verify(%q) = %v, not one of the sentinels", header, err)
		}
		// A genuine signature over arbitrary bytes always verifies at its own time (after 1970;
		// a negative t is malformed by design).
		if at.Unix() < 0 {
			return
		}
		if err := Verify(Sign(secretNew, at, payload), payload, [][]byte{secretOld, secretNew}, at, DefaultTolerance); err != nil {
			t.Fatalf("Verify(Sign(payload)) at %v = %v", at, err)
		}
	})
}
