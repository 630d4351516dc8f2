package postmark_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/postmark"
)

func TestDropAfterCommitReallyCommits(t *testing.T) {
	t.Parallel()
	f := setup(t, postmark.Config{LookupLag: 10 * time.Second})
	f.pm.SetFaults("al_lost", postmark.Fault{Kind: postmark.DropAfterCommit})

	_, err := f.do(http.MethodPost, "/email", serverToken, emailBody("jane@example.com", "al_lost"))
	if err == nil {
		t.Fatal("send answered; want the connection closed with no answer")
	}
	if got := f.pm.Effects("al_lost"); got != 1 {
		t.Fatalf("Effects = %d, want 1: the email went out although the client saw no answer", got)
	}
	if got := f.search(t, "al_lost").TotalCount; got != 0 {
		t.Errorf("search before the lag found %d, want 0", got)
	}
	f.clock.Advance(10 * time.Second)
	if got := f.search(t, "al_lost").TotalCount; got != 1 {
		t.Errorf("search after the lag found %d, want the lost message", got)
	}

	// No key means the resend is a second email.
	f.send(t, emailBody("jane@example.com", "al_lost"))
	if got := f.pm.Effects("al_lost"); got != 2 {
		t.Errorf("Effects after a blind resend = %d, want 2", got)
	}
}

func TestFaultsSayWhetherTheMessageExists(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		fault       postmark.Fault
		wantStatus  int
		wantCode    int
		wantEffects int
		// wantRetryAfter is the Retry-After header the answer must carry.
		wantRetryAfter string
	}{
		{"500 after commit", postmark.Fault{Kind: postmark.Error500AfterCommit}, http.StatusInternalServerError, 0, 1, ""},
		{"500 before commit", postmark.Fault{Kind: postmark.Error500BeforeCommit}, http.StatusInternalServerError, 0, 0, ""},
		{"late answer after commit", postmark.Fault{Kind: postmark.DelayAfterCommit, MS: 50}, http.StatusOK, 0, 1, ""},
		{"rate limit", postmark.Fault{Kind: postmark.RateLimit429}, http.StatusTooManyRequests, postmark.ErrRateLimitExceeded, 0, ""},
		{"rate limit with Retry-After", postmark.Fault{Kind: postmark.RateLimit429, RetryAfterS: 5}, http.StatusTooManyRequests, postmark.ErrRateLimitExceeded, 0, "5"},
		{"rejected", postmark.Fault{Kind: postmark.Reject422}, http.StatusUnprocessableEntity, postmark.ErrInvalidEmailRequest, 0, ""},
		{"rejected with a code", postmark.Fault{Kind: postmark.Reject422, ErrorCode: postmark.ErrNotAllowedToSend}, http.StatusUnprocessableEntity, postmark.ErrNotAllowedToSend, 0, ""},
		{"rotated token", postmark.Fault{Kind: postmark.Unauthorized401}, http.StatusUnauthorized, postmark.ErrBadToken, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, postmark.Config{})
			f.pm.SetFaults("", tc.fault)

			r := f.must(t, http.MethodPost, "/email", emailBody("jane@example.com", "al_f"))
			if r.Status != tc.wantStatus {
				t.Fatalf("status = %d, want %d (body %s)", r.Status, tc.wantStatus, r.Body)
			}
			if tc.wantStatus != http.StatusOK {
				if e := r.apiError(t); e.ErrorCode != tc.wantCode {
					t.Errorf("ErrorCode = %d, want %d", e.ErrorCode, tc.wantCode)
				}
			}
			if got := r.Header.Get("Retry-After"); got != tc.wantRetryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tc.wantRetryAfter)
			}
			if got := f.pm.Effects("al_f"); got != tc.wantEffects {
				t.Errorf("Effects = %d, want %d", got, tc.wantEffects)
			}
			// The queue held one fault: the next request is served normally.
			f.send(t, emailBody("jane@example.com", "al_f"))
			if got := f.pm.Effects("al_f"); got != tc.wantEffects+1 {
				t.Errorf("Effects after a clean send = %d, want %d", got, tc.wantEffects+1)
			}
		})
	}
}

func TestFaultQueuesArePerReferenceAndSkipRefusedRequests(t *testing.T) {
	t.Parallel()
	f := setup(t, postmark.Config{InactiveRecipients: []string{"bounced@example.com"}})
	f.pm.SetFaults("al_a", postmark.Fault{Kind: postmark.RateLimit429})

	// Requests refused before the queue is consulted consume nothing.
	if r, err := f.do(http.MethodPost, "/email", nil, emailBody("jane@example.com", "al_a")); err != nil || r.Status != http.StatusUnauthorized {
		t.Fatalf("no token: %v, %+v", err, r)
	}
	if r := f.must(t, http.MethodPost, "/email", emailBody("bounced@example.com", "al_a")); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("inactive recipient: status %d", r.Status)
	}
	// Another reference does not take al_a's fault.
	f.send(t, emailBody("jane@example.com", "al_b"))

	if r := f.must(t, http.MethodPost, "/email", emailBody("jane@example.com", "al_a")); r.Status != http.StatusTooManyRequests {
		t.Fatalf("al_a: status %d, want the queued 429", r.Status)
	}
	f.send(t, emailBody("jane@example.com", "al_a"))
	if a, b := f.pm.Effects("al_a"), f.pm.Effects("al_b"); a != 1 || b != 1 {
		t.Errorf("Effects(al_a), Effects(al_b) = %d, %d; want 1, 1", a, b)
	}
}

func TestSetFaultsRejectsAnUnknownKind(t *testing.T) {
	t.Parallel()
	f := setup(t, postmark.Config{})
	defer func() {
		if recover() == nil {
			t.Error("SetFaults accepted an unknown fault kind")
		}
	}()
	f.pm.SetFaults("", postmark.Fault{Kind: "melt"})
}
