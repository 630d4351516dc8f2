package console_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/internal/testreceiver"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/notify"
)

// TestOverviewNamesAReceiverThatGaveUpAnEvent: a notification receiver
// that answers 500 to every delivery has its approval.requested given up
// once the retry window ends; the overview then lists it under
// "Notifications failing", and a scoped approver, whose tenant's
// receivers it does not see, gets no such section.
func TestOverviewNamesAReceiverThatGaveUpAnEvent(t *testing.T) {
	t.Parallel()
	down := testreceiver.New(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	})
	p := testpipeline.New(t, testpipeline.Options{
		Env: map[string]string{"NOTIFY_SECRET": testreceiver.Secret(t)},
		Notifications: "  slack-relay:\n    url: " + down.URL + "\n    secret_env: NOTIFY_SECRET\n" +
			"    tenant: \"Acme Corp.\"\n    events: [approval.requested]\n",
		Notify: notify.Config{ConsoleURL: "http://console.example/console", BackoffInitial: 50 * time.Millisecond,
			BackoffMax: 200 * time.Millisecond, Timeout: 2 * time.Second, RetryFor: time.Second},
	})
	p.Start(1)
	propose(t, p, "po-n1", `{"sku":"N-1","qty":1}`)
	p.Eventually(20*time.Second, "the receiver's event to be given up", func() bool {
		failures, err := p.Store.NotificationFailures(context.Background(), ledger.WholeTenant(p.TenantID))
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(failures, func(f ledger.ReceiverFailures) bool { return f.Receiver == "slack-relay" && f.Failed == 1 })
	})
	if n := len(down.Deliveries()); n < 2 {
		t.Fatalf("the receiver got %d attempts, want retries before the give-up", n)
	}
	res := signIn(t, p, p.Operator).get("/console/")
	i := strings.Index(res.body, `id="notifications-failing"`)
	if res.status != http.StatusOK || i < 0 {
		t.Fatalf("overview (%d) has no notifications section:\n%s", res.status, res.body)
	}
	if section := res.body[i:]; !strings.Contains(section, "slack-relay: 1 event given up") {
		t.Errorf("the section does not name slack-relay's given-up event:\n%s", section)
	}
	scoped := signIn(t, p, p.ScopedToken("supply-eu", auth.RoleApprover)).get("/console/")
	if strings.Contains(scoped.body, "notifications-failing") {
		t.Errorf("a scoped approver's overview shows the tenant's receivers")
	}
}
