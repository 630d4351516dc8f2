package github_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/github"
)

func TestDropAfterCommitReallyCommits(t *testing.T) {
	t.Parallel()
	f := setup(t, github.Config{LookupLag: 10 * time.Second})
	f.gh.SetFaults("al_lost", github.Fault{Kind: github.DropAfterCommit})

	_, err := f.do(http.MethodPost, "/repos/acme/support/issues", "Bearer "+github.DefaultToken, issueBody("al_lost"))
	if err == nil {
		t.Fatal("create answered; want the connection closed with no answer")
	}
	if got := f.gh.Effects("al_lost"); got != 1 {
		t.Fatalf("Effects = %d, want 1: the issue exists although the client saw no answer", got)
	}
	if got := f.search(t, "al_lost").TotalCount; got != 0 {
		t.Errorf("search before the lag found %d, want 0", got)
	}
	f.clock.Advance(10 * time.Second)
	if got := f.search(t, "al_lost"); got.TotalCount != 1 {
		t.Errorf("search after the lag = %+v, want the lost issue", got)
	}

	// No key means the resend is a second issue.
	f.create(t, issueBody("al_lost"))
	if got := f.gh.Effects("al_lost"); got != 2 {
		t.Errorf("Effects after a blind resend = %d, want 2", got)
	}
}

func TestFaultsSayWhetherTheIssueExists(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		fault       github.Fault
		wantStatus  int
		wantEffects int
		// wantHeader is a header the answer must carry, with its value.
		wantHeader [2]string
		wantMsg    string
	}{
		{"500 after commit", github.Fault{Kind: github.Error500AfterCommit}, http.StatusInternalServerError, 1, [2]string{}, "Server Error"},
		{"late answer after commit", github.Fault{Kind: github.DelayAfterCommit, MS: 50}, http.StatusCreated, 1, [2]string{}, ""},
		{"primary rate limit", github.Fault{Kind: github.PrimaryRateLimit403}, http.StatusForbidden, 0,
			[2]string{"X-Ratelimit-Remaining", "0"}, "API rate limit exceeded for user ID 1."},
		{"secondary rate limit 403", github.Fault{Kind: github.SecondaryRateLimit403, RetryAfterS: 7}, http.StatusForbidden, 0,
			[2]string{"Retry-After", "7"}, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."},
		{"secondary rate limit 429", github.Fault{Kind: github.SecondaryRateLimit429}, http.StatusTooManyRequests, 0,
			[2]string{"Retry-After", "60"}, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."},
		{"validation failed", github.Fault{Kind: github.Reject422}, http.StatusUnprocessableEntity, 0, [2]string{}, "Validation Failed"},
		{"revoked token", github.Fault{Kind: github.Unauthorized401}, http.StatusUnauthorized, 0, [2]string{}, "Bad credentials"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, github.Config{})
			f.gh.SetFaults("", tc.fault)

			r := f.must(t, http.MethodPost, "/repos/acme/support/issues", issueBody("al_f"))
			if r.Status != tc.wantStatus {
				t.Fatalf("status = %d, want %d (body %s)", r.Status, tc.wantStatus, r.Body)
			}
			if h := tc.wantHeader; h[0] != "" && r.Header.Get(h[0]) != h[1] {
				t.Errorf("%s = %q, want %q", h[0], r.Header.Get(h[0]), h[1])
			}
			if tc.wantMsg != "" {
				if got := r.message(t); got != tc.wantMsg {
					t.Errorf("message = %q, want %q", got, tc.wantMsg)
				}
			}
			if got := f.gh.Effects("al_f"); got != tc.wantEffects {
				t.Errorf("Effects = %d, want %d", got, tc.wantEffects)
			}
			// The queue held one fault: the next request is served normally.
			f.create(t, issueBody("al_f"))
			if got := f.gh.Effects("al_f"); got != tc.wantEffects+1 {
				t.Errorf("Effects after a clean create = %d, want %d", got, tc.wantEffects+1)
			}
		})
	}
}

func TestFaultQueuesArePerReferenceAndSkipRefusedRequests(t *testing.T) {
	t.Parallel()
	f := setup(t, github.Config{})
	f.gh.SetFaults("al_a", github.Fault{Kind: github.Reject422})

	// A request refused before the queue is consulted consumes nothing.
	if r, err := f.do(http.MethodPost, "/repos/acme/support/issues", "Bearer wrong", issueBody("al_a")); err != nil || r.Status != http.StatusUnauthorized {
		t.Fatalf("bad token: %v, %+v", err, r)
	}
	// Another reference does not take al_a's fault.
	f.create(t, issueBody("al_b"))

	if r := f.must(t, http.MethodPost, "/repos/acme/support/issues", issueBody("al_a")); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("al_a: status %d, want the queued 422", r.Status)
	}
	f.create(t, issueBody("al_a"))
	if a, b := f.gh.Effects("al_a"), f.gh.Effects("al_b"); a != 1 || b != 1 {
		t.Errorf("Effects(al_a), Effects(al_b) = %d, %d; want 1, 1", a, b)
	}
}

func TestSetFaultsRejectsAnUnknownKind(t *testing.T) {
	t.Parallel()
	f := setup(t, github.Config{})
	defer func() {
		if recover() == nil {
			t.Error("SetFaults accepted an unknown fault kind")
		}
	}()
	f.gh.SetFaults("", github.Fault{Kind: "melt"})
}
