package webhook

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// msgID is a webhook-id as Standard Webhooks suppliers send them.
const msgID = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"

// fixture is one scheme with two secrets of the form its suppliers hand out.
type fixture struct {
	scheme   Scheme
	old, new []byte
}

func standardSecret(seed string) []byte {
	return []byte("whsec_" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat(seed, 32)[:32])))
}

var fixtures = []fixture{
	{SchemeActledger, secretOld, secretNew},
	{SchemeStripe, []byte("whsec_stripe_old_0123456789"), []byte("whsec_stripe_new_9876543210")},
	{SchemeGitHub, []byte("github old token 0123456789"), []byte("github new token 9876543210")},
	{SchemeStandard, standardSecret("old"), standardSecret("new")},
}

// timestamped reports whether the scheme signs a timestamp (and so can be stale).
func timestamped(s Scheme) bool { return s != SchemeGitHub }

// signed returns the headers a supplier using scheme sends for payload signed with secret at.
func signed(t testing.TB, scheme Scheme, secret []byte, at time.Time, payload []byte) http.Header {
	t.Helper()
	h, err := SignHeaders(scheme, secret, msgID, at, payload)
	if err != nil {
		t.Fatalf("SignHeaders(%s) = %v", scheme, err)
	}
	return h
}

// signatureHeader is the header of the scheme that carries the signature itself.
func signatureHeader(s Scheme) string {
	hs := s.Headers()
	return hs[len(hs)-1]
}

func TestEverySchemeAcceptsAGoodSignature(t *testing.T) {
	t.Parallel()
	for _, f := range fixtures {
		t.Run(string(f.scheme), func(t *testing.T) {
			t.Parallel()
			h := signed(t, f.scheme, f.new, now, body)
			if err := VerifyRequest(f.scheme, h, body, [][]byte{f.new}, now, DefaultTolerance); err != nil {
				t.Errorf("VerifyRequest(%v) = %v, want nil", h, err)
			}
		})
	}
}

func TestEverySchemeRefusesAForgery(t *testing.T) {
	t.Parallel()
	tampered := []byte(strings.Replace(string(body), "succeeded", "failed", 1))
	for _, f := range fixtures {
		good := signed(t, f.scheme, f.old, now, body)
		type forgery struct {
			name    string
			h       http.Header
			body    []byte
			secrets [][]byte
			want    error
		}
		tests := []forgery{
			{name: "tampered body", h: good, body: tampered, secrets: [][]byte{f.old}, want: ErrMismatch},
			{name: "body with an extra byte", h: good, body: append(append([]byte(nil), body...), ' '), secrets: [][]byte{f.old}, want: ErrMismatch},
			{name: "wrong secret", h: good, body: body, secrets: [][]byte{f.new}, want: ErrMismatch},
			{name: "signed with an empty secret", h: signedEmpty(t, f.scheme), body: body, secrets: [][]byte{{}, f.old}, want: ErrMismatch},
			{name: "no secrets", h: good, body: body, secrets: nil, want: ErrNoSecret},
			{name: "only empty secrets", h: good, body: body, secrets: [][]byte{{}, nil}, want: ErrNoSecret},
			{name: "no secrets and no header", h: http.Header{}, body: body, secrets: nil, want: ErrNoSecret},
		}
		if f.scheme == SchemeStandard {
			otherID := good.Clone()
			otherID.Set(StandardIDHeader, "msg_another")
			tests = append(tests, forgery{name: "webhook-id altered", h: otherID, body: body, secrets: [][]byte{f.old}, want: ErrMismatch})
		}
		for _, tt := range tests {
			t.Run(string(f.scheme)+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				err := VerifyRequest(f.scheme, tt.h, tt.body, tt.secrets, now, DefaultTolerance)
				if !errors.Is(err, tt.want) {
					t.Errorf("VerifyRequest = %v, want %v", err, tt.want)
				}
			})
		}
	}
}

func TestTimestampedSchemesRefuseAStaleOrAlteredTimestamp(t *testing.T) {
	t.Parallel()
	for _, f := range fixtures {
		if !timestamped(f.scheme) {
			continue
		}
		good := signed(t, f.scheme, f.old, now, body)
		altered := good.Clone()
		if f.scheme == SchemeStandard {
			altered.Set(StandardTimestampHeader, "1750000001")
		} else {
			name := signatureHeader(f.scheme)
			altered.Set(name, strings.Replace(good.Get(name), "t=1750000000", "t=1750000001", 1))
		}
		tests := []struct {
			name      string
			h         http.Header
			at        time.Time
			tolerance time.Duration
			want      error
		}{
			{name: "301 s old", h: good, at: now.Add(301 * time.Second), want: ErrStale},
			{name: "301 s in the future", h: good, at: now.Add(-301 * time.Second), want: ErrStale},
			{name: "a day old", h: good, at: now.Add(24 * time.Hour), want: ErrStale},
			{name: "outside a custom tolerance", h: good, at: now.Add(11 * time.Second), tolerance: 10 * time.Second, want: ErrStale},
			{name: "300 s old is inside the default", h: good, at: now.Add(300 * time.Second), want: nil},
			{name: "300 s in the future is inside the default", h: good, at: now.Add(-300 * time.Second), want: nil},
			{name: "timestamp altered", h: altered, at: now, want: ErrMismatch},
			{name: "timestamp altered and stale is a mismatch, not stale", h: altered, at: now.Add(time.Hour), want: ErrMismatch},
		}
		for _, tt := range tests {
			t.Run(string(f.scheme)+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				err := VerifyRequest(f.scheme, tt.h, body, [][]byte{f.old}, tt.at, tt.tolerance)
				if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
					t.Errorf("VerifyRequest = %v, want %v", err, tt.want)
				}
			})
		}
	}
}

func TestGitHubHasNoStaleness(t *testing.T) {
	t.Parallel()
	h := signed(t, SchemeGitHub, fixtures[2].new, now, body)
	for _, at := range []time.Time{now.AddDate(10, 0, 0), now.AddDate(-10, 0, 0), time.Unix(0, 0)} {
		if err := VerifyRequest(SchemeGitHub, h, body, [][]byte{fixtures[2].new}, at, time.Second); err != nil {
			t.Errorf("VerifyRequest at %v = %v, want nil: a GitHub signature carries no time", at, err)
		}
	}
}

func TestEverySchemeAcceptsARotatedSecret(t *testing.T) {
	t.Parallel()
	for _, f := range fixtures {
		tests := []struct {
			name     string
			signWith []byte
			secrets  [][]byte
		}{
			{"we hold new and old, supplier signs with old", f.old, [][]byte{f.new, f.old}},
			{"we hold new and old, supplier signs with new", f.new, [][]byte{f.new, f.old}},
			{"an empty entry among our secrets is skipped", f.old, [][]byte{{}, f.old}},
		}
		for _, tt := range tests {
			t.Run(string(f.scheme)+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				h := signed(t, f.scheme, tt.signWith, now, body)
				if err := VerifyRequest(f.scheme, h, body, tt.secrets, now, DefaultTolerance); err != nil {
					t.Errorf("VerifyRequest = %v, want nil", err)
				}
			})
		}
	}
}

func TestAnyOfSeveralSignaturesInTheHeaderVerifies(t *testing.T) {
	t.Parallel()
	stripe, standard := fixtures[1], fixtures[3]
	stripeOld := SignStripe(stripe.old, now, body)
	stripeNew := SignStripe(stripe.new, now, body)
	standardOld, err := SignStandard(standard.old, msgID, now, body)
	if err != nil {
		t.Fatal(err)
	}
	standardNew, err := SignStandard(standard.new, msgID, now, body)
	if err != nil {
		t.Fatal(err)
	}
	junk := base64.StdEncoding.EncodeToString(make([]byte, 64))
	tests := []struct {
		name   string
		scheme Scheme
		value  string
	}{
		{"stripe: two v1 and a v0", SchemeStripe,
			stripeOld + "," + stripeNew[strings.Index(stripeNew, "v1="):] + ",v0=" + strings.Repeat("ab", 32)},
		{"stripe: v0 first, spaces around elements", SchemeStripe,
			"v0=" + strings.Repeat("cd", 32) + " , " + strings.ReplaceAll(stripeNew, ",", " , ") + "," + stripeOld[strings.Index(stripeOld, "v1="):]},
		{"standard: v1 old, v1a, v1 new", SchemeStandard, standardOld + " v1a," + junk + " " + standardNew},
		{"standard: a v2 entry and repeated spaces", SchemeStandard, "v2,whatever   " + standardNew + "  " + standardOld},
	}
	for _, tt := range tests {
		for _, secret := range [][]byte{fixtureOf(tt.scheme).old, fixtureOf(tt.scheme).new} {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				h := signed(t, tt.scheme, secret, now, body)
				h.Set(signatureHeader(tt.scheme), tt.value)
				if err := VerifyRequest(tt.scheme, h, body, [][]byte{secret}, now, DefaultTolerance); err != nil {
					t.Errorf("VerifyRequest(%q) = %v, want nil", tt.value, err)
				}
			})
		}
	}
}

// signedEmpty is a webhook signed with an empty key, which must never verify. SignStandard
// refuses an empty secret, so for that scheme the signature is made with the empty-key MAC
// directly.
func signedEmpty(t testing.TB, scheme Scheme) http.Header {
	t.Helper()
	if scheme != SchemeStandard {
		return signed(t, scheme, nil, now, body)
	}
	h := signed(t, scheme, fixtureOf(scheme).old, now, body)
	h.Set(StandardSignatureHeader, "v1,"+base64.StdEncoding.EncodeToString(standardMAC(nil, msgID, "1750000000", body)))
	return h
}

func fixtureOf(s Scheme) fixture {
	for _, f := range fixtures {
		if f.scheme == s {
			return f
		}
	}
	panic("no fixture for " + s)
}

func TestAMissingHeaderIsToldApartFromAMalformedOne(t *testing.T) {
	t.Parallel()
	for _, f := range fixtures {
		for _, name := range f.scheme.Headers() {
			for _, how := range []string{"absent", "empty", "blank"} {
				t.Run(string(f.scheme)+"/"+name+" "+how, func(t *testing.T) {
					t.Parallel()
					h := signed(t, f.scheme, f.old, now, body)
					switch how {
					case "absent":
						h.Del(name)
					case "empty":
						h.Set(name, "")
					case "blank":
						h.Set(name, "  ")
					}
					err := VerifyRequest(f.scheme, h, body, [][]byte{f.old}, now, DefaultTolerance)
					var missing *MissingHeaderError
					if !errors.Is(err, ErrMissing) || !errors.Is(err, ErrMalformed) || !errors.As(err, &missing) {
						t.Fatalf("VerifyRequest = %v, want a *MissingHeaderError matching ErrMissing and ErrMalformed", err)
					}
					if missing.Header != name {
						t.Errorf("missing header = %q, want %q", missing.Header, name)
					}
				})
			}
		}
	}
	t.Run("a malformed header is not missing", func(t *testing.T) {
		t.Parallel()
		for _, f := range fixtures {
			h := signed(t, f.scheme, f.old, now, body)
			h.Set(signatureHeader(f.scheme), "garbage")
			err := VerifyRequest(f.scheme, h, body, [][]byte{f.old}, now, DefaultTolerance)
			if !errors.Is(err, ErrMalformed) || errors.Is(err, ErrMissing) {
				t.Errorf("%s: VerifyRequest = %v, want ErrMalformed and not ErrMissing", f.scheme, err)
			}
		}
	})
	t.Run("Verify reports its missing header the same way", func(t *testing.T) {
		t.Parallel()
		var missing *MissingHeaderError
		if err := Verify("", body, [][]byte{secretOld}, now, 0); !errors.As(err, &missing) || missing.Header != Header {
			t.Errorf("Verify(\"\") = %v, want *MissingHeaderError for %s", err, Header)
		}
	})
}

func TestMalformedHeadersAreRejectedInEveryScheme(t *testing.T) {
	t.Parallel()
	hex64 := strings.Repeat("ab", 32)
	b64sig := base64.StdEncoding.EncodeToString(make([]byte, 32))
	long := strings.Repeat("x", maxHeaderLen+1)
	tests := []struct {
		scheme Scheme
		name   string
		header string // set to value
		value  string
	}{
		{SchemeStripe, "garbage", StripeHeader, "sha256=" + hex64},
		{SchemeStripe, "no timestamp", StripeHeader, "v1=" + hex64},
		{SchemeStripe, "no v1, only v0", StripeHeader, "t=1750000000,v0=" + hex64},
		{SchemeStripe, "non-hex v1", StripeHeader, "t=1750000000,v1=" + strings.Repeat("zz", 32)},
		{SchemeStripe, "short v1", StripeHeader, "t=1750000000,v1=abcd"},
		{SchemeStripe, "fractional timestamp", StripeHeader, "t=1750000000.5,v1=" + hex64},
		{SchemeStripe, "two timestamps", StripeHeader, "t=1750000000,t=1750000001,v1=" + hex64},
		{SchemeStripe, "too long", StripeHeader, "t=1750000000,v1=" + hex64 + "," + long},

		{SchemeGitHub, "no prefix", GitHubHeader, hex64},
		{SchemeGitHub, "sha1 prefix", GitHubHeader, "sha1=" + strings.Repeat("ab", 20)},
		{SchemeGitHub, "upper-case prefix", GitHubHeader, "SHA256=" + hex64},
		{SchemeGitHub, "colon instead of =", GitHubHeader, "sha256:" + hex64},
		{SchemeGitHub, "empty digest", GitHubHeader, "sha256="},
		{SchemeGitHub, "short digest", GitHubHeader, "sha256=abcd"},
		{SchemeGitHub, "non-hex digest", GitHubHeader, "sha256=" + strings.Repeat("zz", 32)},
		{SchemeGitHub, "two digests", GitHubHeader, "sha256=" + hex64 + ",sha256=" + hex64},
		{SchemeGitHub, "too long", GitHubHeader, "sha256=" + long},

		{SchemeStandard, "timestamp not a number", StandardTimestampHeader, "yesterday"},
		{SchemeStandard, "negative timestamp", StandardTimestampHeader, "-1"},
		{SchemeStandard, "fractional timestamp", StandardTimestampHeader, "1750000000.5"},
		{SchemeStandard, "timestamp in milliseconds overflowing", StandardTimestampHeader, "99999999999999999999"},
		{SchemeStandard, "id with a dot", StandardIDHeader, "msg.1750000000"},
		{SchemeStandard, "id too long", StandardIDHeader, long},
		{SchemeStandard, "entry without a comma", StandardSignatureHeader, "v1" + b64sig},
		{SchemeStandard, "entry with an empty version", StandardSignatureHeader, "," + b64sig},
		{SchemeStandard, "v1 not base64", StandardSignatureHeader, "v1,***"},
		{SchemeStandard, "v1 of the wrong length", StandardSignatureHeader, "v1," + base64.StdEncoding.EncodeToString(make([]byte, 20))},
		{SchemeStandard, "v1 hex instead of base64", StandardSignatureHeader, "v1," + hex64},
		{SchemeStandard, "only v1a", StandardSignatureHeader, "v1a," + base64.StdEncoding.EncodeToString(make([]byte, 64))},
		{SchemeStandard, "stripe's format", StandardSignatureHeader, "t=1750000000,v1=" + hex64},
		{SchemeStandard, "signature too long", StandardSignatureHeader, long},
	}
	for _, tt := range tests {
		t.Run(string(tt.scheme)+"/"+tt.name, func(t *testing.T) {
			t.Parallel()
			f := fixtureOf(tt.scheme)
			h := signed(t, tt.scheme, f.old, now, body)
			h.Set(tt.header, tt.value)
			err := VerifyRequest(tt.scheme, h, body, [][]byte{f.old}, now, DefaultTolerance)
			if !errors.Is(err, ErrMalformed) || errors.Is(err, ErrMissing) {
				t.Errorf("VerifyRequest with %s: %q = %v, want ErrMalformed (not missing)", tt.header, truncate(tt.value), err)
			}
		})
	}
}

func TestAHeaderSentTwiceIsMalformed(t *testing.T) {
	t.Parallel()
	for _, f := range fixtures {
		for _, name := range f.scheme.Headers() {
			t.Run(string(f.scheme)+"/"+name, func(t *testing.T) {
				t.Parallel()
				h := signed(t, f.scheme, f.old, now, body)
				h.Add(name, h.Get(name)) // even an identical copy: which one a proxy reads is unknown
				if err := VerifyRequest(f.scheme, h, body, [][]byte{f.old}, now, DefaultTolerance); !errors.Is(err, ErrMalformed) {
					t.Errorf("VerifyRequest with two %s = %v, want ErrMalformed", name, err)
				}
			})
		}
	}
}

// The vectors published with each scheme, checked against both the signer and the verifier.
func TestDocumentedVectors(t *testing.T) {
	t.Parallel()
	t.Run("github docs", func(t *testing.T) {
		t.Parallel()
		// https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries,
		// "Testing the webhook payload validation".
		secret, payload := []byte("It's a Secret to Everybody"), []byte("Hello, World!")
		const want = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
		if got := SignGitHub(secret, payload); got != want {
			t.Errorf("SignGitHub = %q, want %q", got, want)
		}
		h := http.Header{}
		h.Set("x-hub-signature-256", want) // as a server receives it: case is irrelevant
		if err := VerifyRequest(SchemeGitHub, h, payload, [][]byte{secret}, now, 0); err != nil {
			t.Errorf("VerifyRequest(documented vector) = %v, want nil", err)
		}
	})
	t.Run("standard webhooks reference library", func(t *testing.T) {
		t.Parallel()
		// github.com/standard-webhooks/standard-webhooks, libraries/go/webhook_test.go,
		// TestWebhookSign; the same key is used there with and without the prefix.
		at := time.Unix(1614265330, 0)
		payload := []byte(`{"test": 2432232314}`)
		const id, want = "msg_p5jXN8AQM9LWM0D4loKWxJek", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
		for _, secret := range []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"} {
			got, err := SignStandard([]byte(secret), id, at, payload)
			if err != nil || got != want {
				t.Errorf("SignStandard(%.12s…) = %q, %v, want %q", secret, got, err, want)
			}
			h := http.Header{}
			h.Set(StandardIDHeader, id)
			h.Set(StandardTimestampHeader, "1614265330")
			h.Set(StandardSignatureHeader, want)
			if err := VerifyRequest(SchemeStandard, h, payload, [][]byte{[]byte(secret)}, at.Add(time.Minute), 0); err != nil {
				t.Errorf("VerifyRequest(reference vector, %.12s…) = %v, want nil", secret, err)
			}
		}
	})
	t.Run("stripe, computed independently", func(t *testing.T) {
		t.Parallel()
		// Stripe publishes no vector. This one was computed outside Go:
		//   printf '%s' '1750000000.{"id":"evt_1","object":"event"}' | openssl dgst -sha256 -hmac whsec_stripe_vector_secret
		// It shows the signed content is "<t>.<body>" and the key is the secret with its whsec_
		// prefix; keyed without the prefix the HMAC would be eb0280328b5b…, another value.
		secret, payload := []byte("whsec_stripe_vector_secret"), []byte(`{"id":"evt_1","object":"event"}`)
		const want = "t=1750000000,v1=99f1c7c0d5b5f3617e67bd3e8afe6efb894b500ff90d83628a0a9951f73e3471"
		if got := SignStripe(secret, now, payload); got != want {
			t.Errorf("SignStripe = %q, want %q", got, want)
		}
		h := http.Header{}
		h.Set(StripeHeader, want)
		if err := VerifyRequest(SchemeStripe, h, payload, [][]byte{secret}, now, 0); err != nil {
			t.Errorf("VerifyRequest = %v, want nil", err)
		}
		if err := VerifyRequest(SchemeStripe, h, payload, [][]byte{[]byte("stripe_vector_secret")}, now, 0); !errors.Is(err, ErrMismatch) {
			t.Errorf("VerifyRequest with the prefix stripped from the secret = %v, want ErrMismatch", err)
		}
	})
}

func TestStandardSecretsAreDecodedNotUsedAsText(t *testing.T) {
	t.Parallel()
	f := fixtureOf(SchemeStandard)
	h := signed(t, SchemeStandard, f.old, now, body)
	unprefixed := []byte(strings.TrimPrefix(string(f.old), "whsec_"))
	unpadded := []byte("whsec_" + base64.RawStdEncoding.EncodeToString([]byte(strings.Repeat("old", 11)[:32])))
	tests := []struct {
		name    string
		secrets [][]byte
		want    error
	}{
		{"the same key without the whsec_ prefix", [][]byte{unprefixed}, nil},
		{"the same key in unpadded base64", [][]byte{unpadded}, nil},
		{"an undecodable secret beside a good one is skipped", [][]byte{[]byte("whsec_not base64!"), f.old}, nil},
		{"the secret's text as the key does not verify", [][]byte{[]byte(base64.StdEncoding.EncodeToString(f.old))}, ErrMismatch},
		{"only undecodable secrets", [][]byte{[]byte("whsec_not base64!"), []byte("whsec_%%%")}, ErrNoSecret},
		{"only a bare prefix", [][]byte{[]byte("whsec_")}, ErrNoSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := VerifyRequest(SchemeStandard, h, body, tt.secrets, now, DefaultTolerance)
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Errorf("VerifyRequest = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestCheckSecretStopsAnUnusableSecretAtStart(t *testing.T) {
	t.Parallel()
	const badStandard = "whsec_this is not base64"
	tests := []struct {
		scheme  Scheme
		secret  string
		wantErr bool
	}{
		{SchemeActledger, "whsec_anything", false},
		{SchemeStripe, "whsec_anything at all", false},
		{SchemeGitHub, "It's a Secret to Everybody", false},
		{SchemeStandard, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", false},
		{SchemeStandard, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", false},
		{SchemeActledger, "", true},
		{SchemeGitHub, "", true},
		{SchemeStandard, badStandard, true},
		{SchemeStandard, "whsec_", true},
		{SchemeHMAC, "any bytes at all", false},
		{SchemeHMAC, "", true},
		{Scheme("sha256"), "whsec_anything", true},
	}
	for _, tt := range tests {
		t.Run(string(tt.scheme)+"/"+tt.secret, func(t *testing.T) {
			t.Parallel()
			err := tt.scheme.CheckSecret([]byte(tt.secret))
			if (err != nil) != tt.wantErr {
				t.Fatalf("CheckSecret(%q) = %v, want error: %v", tt.secret, err, tt.wantErr)
			}
			if leak := strings.TrimPrefix(tt.secret, "whsec_"); err != nil && leak != "" && strings.Contains(err.Error(), leak) {
				t.Errorf("CheckSecret error %q quotes the secret", err)
			}
		})
	}
}

func TestParseSchemeKnowsExactlyTheFiveSchemes(t *testing.T) {
	t.Parallel()
	for _, s := range Schemes() {
		got, err := ParseScheme(s.String())
		if err != nil || got != s {
			t.Errorf("ParseScheme(%q) = %q, %v, want %q", s, got, err, s)
		}
		if len(s.Headers()) == 0 && s != SchemeHMAC {
			t.Errorf("%s.Headers() is empty", s)
		}
	}
	if got, want := len(Schemes()), 5; got != want {
		t.Errorf("len(Schemes()) = %d, want %d", got, want)
	}
	for _, name := range []string{"", "Stripe", "GITHUB", " standard", "v1", "HMAC"} {
		_, err := ParseScheme(name)
		if err == nil || !strings.Contains(err.Error(), "actledger, stripe, github, standard") {
			t.Errorf("ParseScheme(%q) = %v, want an error listing the valid schemes", name, err)
		}
	}
	var s Scheme
	if err := s.UnmarshalText([]byte("github")); err != nil || s != SchemeGitHub {
		t.Errorf("UnmarshalText(github) = %v, scheme %q", err, s)
	}
	if err := s.UnmarshalText([]byte("gitlab")); err == nil || s != SchemeGitHub {
		t.Errorf("UnmarshalText(gitlab) = %v, scheme %q; want an error and the scheme unchanged", err, s)
	}
}

func TestHeadersNameWhatEachSchemeReads(t *testing.T) {
	t.Parallel()
	tests := []struct {
		scheme Scheme
		want   []string
	}{
		{SchemeActledger, []string{"Webhook-Signature"}},
		{SchemeStripe, []string{"Stripe-Signature"}},
		{SchemeGitHub, []string{"X-Hub-Signature-256"}},
		{SchemeStandard, []string{"webhook-id", "webhook-timestamp", "webhook-signature"}},
		{Scheme(""), nil},
	}
	for _, tt := range tests {
		if got := tt.scheme.Headers(); strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("%q.Headers() = %q, want %q", tt.scheme, got, tt.want)
		}
		// SignHeaders sends exactly what Headers names.
		if tt.want == nil {
			continue
		}
		h := signed(t, tt.scheme, fixtureOf(tt.scheme).old, now, body)
		if len(h) != len(tt.want) {
			t.Errorf("SignHeaders(%s) set %d headers, want %d", tt.scheme, len(h), len(tt.want))
		}
		for _, name := range tt.want {
			if h.Get(name) == "" {
				t.Errorf("SignHeaders(%s) did not set %s", tt.scheme, name)
			}
		}
	}
}

func TestAnUnknownSchemeVerifiesNothing(t *testing.T) {
	t.Parallel()
	h := signed(t, SchemeActledger, secretOld, now, body)
	for _, s := range []Scheme{"", "Actledger", "none"} {
		err := VerifyRequest(s, h, body, [][]byte{secretOld}, now, DefaultTolerance)
		if err == nil {
			t.Fatalf("VerifyRequest(%q) = nil", s)
		}
		for _, sentinel := range []error{ErrMalformed, ErrMismatch, ErrStale, ErrNoSecret} {
			if errors.Is(err, sentinel) {
				t.Errorf("VerifyRequest(%q) = %v, matches %v: a configuration error must not look like a supplier's", s, err, sentinel)
			}
		}
		if _, err := SignHeaders(s, secretOld, msgID, now, body); err == nil {
			t.Errorf("SignHeaders(%q) = nil error", s)
		}
	}
}

func TestSignStandardRefusesWhatVerificationWouldRefuse(t *testing.T) {
	t.Parallel()
	good := fixtureOf(SchemeStandard).old
	tests := []struct {
		name   string
		secret []byte
		id     string
	}{
		{"empty id", good, ""},
		{"id with a dot", good, "msg.1"},
		{"undecodable secret", []byte("whsec_???"), msgID},
		{"empty secret", nil, msgID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if sig, err := SignStandard(tt.secret, tt.id, now, body); err == nil {
				t.Errorf("SignStandard = %q, nil; want an error", sig)
			}
		})
	}
}

func TestErrorsNeverCarryASecretOrAnExpectedSignature(t *testing.T) {
	t.Parallel()
	for _, f := range fixtures {
		good := signed(t, f.scheme, f.old, now, body)
		expected := good.Get(signatureHeader(f.scheme))
		wrongKey := signed(t, f.scheme, f.new, now, body)
		err := VerifyRequest(f.scheme, wrongKey, body, [][]byte{f.old}, now, DefaultTolerance)
		if err == nil {
			t.Fatalf("%s: VerifyRequest = nil", f.scheme)
		}
		msg := err.Error()
		for _, leak := range []string{string(f.old), strings.TrimPrefix(string(f.old), "whsec_"), expected} {
			if strings.Contains(msg, leak) {
				t.Errorf("%s: error %q leaks %q", f.scheme, msg, leak)
			}
		}
	}
}

func FuzzVerifyRequest(f *testing.F) {
	for i, fx := range fixtures {
		h := signed(f, fx.scheme, fx.old, now, body)
		values := make([]string, 3)
		for j, name := range fx.scheme.Headers() {
			values[j] = h.Get(name)
		}
		f.Add(uint8(i), values[0], values[1], values[2], body, int64(0))
	}
	f.Add(uint8(3), "msg.1", "1750000000", "v1,,v1a, ,", []byte("{}"), int64(1))
	f.Add(uint8(2), "sha256=", "", "", []byte(nil), int64(-1<<63))
	f.Add(uint8(1), "t=99999999999999999999,v1=zz", "", "", []byte("x"), int64(1<<62))
	f.Fuzz(func(t *testing.T, which uint8, v0, v1, v2 string, payload []byte, offset int64) {
		fx := fixtures[int(which)%len(fixtures)]
		at := now.Add(time.Duration(offset))
		h := http.Header{}
		for j, name := range fx.scheme.Headers() {
			h.Set(name, []string{v0, v1, v2}[j])
		}
		// Arbitrary headers must never panic, must fail only with one of the sentinels, and may
		// verify only because of the secret: under another secret they must not.
		err := VerifyRequest(fx.scheme, h, payload, [][]byte{fx.old}, at, DefaultTolerance)
		switch {
		case err == nil:
			if other := VerifyRequest(fx.scheme, h, payload, [][]byte{fx.new}, at, DefaultTolerance); !errors.Is(other, ErrMismatch) {
				t.Fatalf("%s headers %v verified, and under another secret gave %v, want ErrMismatch", fx.scheme, h, other)
			}
		case !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrMismatch) && !errors.Is(err, ErrStale):
			t.Fatalf("%s: VerifyRequest(%v) = %v, not one of the sentinels", fx.scheme, h, err)
		}
		// A genuine signature over arbitrary bytes always verifies at its own time (after 1970).
		if at.Unix() < 0 {
			return
		}
		signedNow, err := SignHeaders(fx.scheme, fx.new, msgID, at, payload)
		if err != nil {
			t.Fatal(err)
		}
		if err := VerifyRequest(fx.scheme, signedNow, payload, [][]byte{fx.old, fx.new}, at, DefaultTolerance); err != nil {
			t.Fatalf("%s: VerifyRequest(SignHeaders(payload)) at %v = %v", fx.scheme, at, err)
		}
	})
}
