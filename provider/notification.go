package provider

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/actledger/actledger/webhook"
)

// Notification events a receiver may take (yaml notifications.<name>.events).
// The ledger writes them under the same names (ledger.NotificationTypes).
const (
	EventApprovalRequested = "approval.requested"
	EventReviewOpened      = "review.opened"
	EventOperationSettled  = "operation.settled"
)

// NotificationEvents lists every event a receiver may take, in the
// contract's order.
var NotificationEvents = []string{EventApprovalRequested, EventReviewOpened, EventOperationSettled}

// Notification is one receiver of the providers file's notifications: key.
// It hears about its tenant's events, signed as Standard Webhooks with the
// secret its secret_env names, read once when the file loads.
type Notification struct {
	// Name is the receiver's key under notifications; it names its
	// durable consumer, its log lines and its metric label.
	Name string
	// URL is where events are POSTed; https, or http to a loopback host.
	URL string
	// SecretEnv names the variable holding the whsec_ secret (yaml
	// secret_env); the secret itself never appears in the file.
	SecretEnv string
	// Tenant is the tenant whose events it hears (required).
	Tenant string
	// Events are the event types it takes (NotificationEvents).
	Events []string

	secret []byte
}

// Secret is the signing secret read from SecretEnv when the file loaded.
func (n *Notification) Secret() []byte { return n.secret }

// Takes reports whether the receiver subscribes to event.
func (n *Notification) Takes(event string) bool { return slices.Contains(n.Events, event) }

// receiverName keeps receiver names usable as NATS consumer names, metric
// labels and path-like log values.
var receiverName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// notificationYAML is a receiver as the file spells it.
type notificationYAML struct {
	URL       string   `yaml:"url"`
	SecretEnv string   `yaml:"secret_env"`
	Tenant    string   `yaml:"tenant"`
	Events    []string `yaml:"events"`
}

// notificationsSection converts the notifications: section, by receiver name: nothing there can
// fail to convert, and notifications validates it.
func notificationsSection(doc map[string]notificationYAML) map[string]Notification {
	out := make(map[string]Notification, len(doc))
	for name, n := range doc {
		out[name] = Notification{Name: name, URL: n.URL, SecretEnv: n.SecretEnv, Tenant: n.Tenant, Events: n.Events}
	}
	return out
}

// notifications converts and validates the file's notifications, reading
// each secret through getenv. Every problem names the receiver and the
// field (and the variable, never its value).
func notifications(doc map[string]Notification, getenv func(string) string) (map[string]*Notification, []*FieldError) {
	out := make(map[string]*Notification, len(doc))
	var errs []*FieldError
	for _, name := range slices.Sorted(maps.Keys(doc)) {
		y := doc[name]
		bad := func(field string, format string, args ...any) {
			errs = append(errs, &FieldError{Notification: name, Field: field, Err: fmt.Errorf(format, args...)})
		}
		n := &Notification{Name: name, URL: strings.TrimSpace(y.URL), SecretEnv: strings.TrimSpace(y.SecretEnv), Tenant: strings.TrimSpace(y.Tenant)}
		if !receiverName.MatchString(name) {
			bad("name", "%q may hold only letters, digits, '-' and '_'", name)
		}
		switch u, err := url.Parse(n.URL); {
		case n.URL == "":
			bad("url", "is required")
		case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
			bad("url", "%q is not an absolute http(s) URL", n.URL)
		case u.User != nil:
			bad("url", "must not carry credentials: events are signed with secret_env")
		case u.Scheme == "http" && !isLoopback(u.Hostname()):
			bad("url", "%q is plain http to a host that is not loopback: use https", n.URL)
		}
		if n.Tenant == "" {
			bad("tenant", "is required: a receiver hears one tenant's events only")
		}
		seen := map[string]bool{}
		for _, e := range y.Events {
			e = strings.TrimSpace(e)
			switch {
			case !slices.Contains(NotificationEvents, e):
				bad("events", "%q is not an event; events are %s", e, strings.Join(NotificationEvents, ", "))
			case seen[e]:
				bad("events", "%q is listed twice", e)
			default:
				seen[e] = true
				n.Events = append(n.Events, e)
			}
		}
		if len(y.Events) == 0 {
			bad("events", "must list at least one of %s", strings.Join(NotificationEvents, ", "))
		}
		switch {
		case n.SecretEnv == "":
			bad("secret_env", "is required (the variable holding the whsec_ signing secret)")
		case !envNamePattern.MatchString(n.SecretEnv):
			bad("secret_env", "%q is not an environment variable name (give the variable's name, never the secret)", n.SecretEnv)
		default:
			v := strings.TrimSpace(getenv(n.SecretEnv))
			if v == "" {
				bad("secret_env", "environment variable %s is not set or is empty", n.SecretEnv)
				break
			}
			if err := webhook.SchemeStandard.CheckSecret([]byte(v)); err != nil {
				bad("secret_env", "environment variable %s: %v", n.SecretEnv, err)
				break
			}
			n.secret = []byte(v)
		}
		out[name] = n
	}
	return out, errs
}

// Notifications returns every notification receiver, sorted by name.
func (r *Registry) Notifications() []*Notification {
	out := make([]*Notification, 0, len(r.notifications))
	for _, name := range slices.Sorted(maps.Keys(r.notifications)) {
		out = append(out, r.notifications[name])
	}
	return out
}

// Notification returns the receiver named name.
func (r *Registry) Notification(name string) (*Notification, bool) {
	n, ok := r.notifications[name]
	return n, ok
}
