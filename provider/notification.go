package provider

import (
	"cmp"
	"errors"
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

// The formats of a receiver (yaml notifications.<name>.format).
const (
	// FormatStandardWebhooks is the default: the event as JSON, signed
	// as Standard Webhooks with secret_env's secret.
	FormatStandardWebhooks = "standard-webhooks"
	// FormatSlack posts a Slack message to an incoming webhook whose URL
	// url_env holds: a Slack incoming webhook cannot verify a signature,
	// and its URL is itself the secret.
	FormatSlack = "slack"
)

// Notification is one receiver of the providers file's notifications: key.
// It hears about its tenant's events, signed as Standard Webhooks with the
// secret its secret_env names, read once when the file loads, or, with
// format slack, as Slack messages to the URL its url_env names.
type Notification struct {
	// Name is the receiver's key under notifications; it names its
	// durable consumer, its log lines and its metric label.
	Name string
	// Format is FormatStandardWebhooks or FormatSlack.
	Format string
	// URL is where events are POSTed; https, or http to a loopback host.
	// For a Slack receiver it is the URL's scheme and host only, safe to
	// print: the whole URL is a secret (Endpoint).
	URL string
	// URLEnv names the variable holding a Slack receiver's URL (yaml
	// url_env).
	URLEnv string
	// SecretEnv names the variable holding the whsec_ secret (yaml
	// secret_env); the secret itself never appears in the file.
	SecretEnv string
	// Tenant is the tenant whose events it hears (required).
	Tenant string
	// Events are the event types it takes (NotificationEvents).
	Events []string

	secret   []byte
	endpoint string
}

// Secret is the signing secret read from SecretEnv when the file loaded.
func (n *Notification) Secret() []byte { return n.secret }

// Endpoint is the address events are POSTed to: URL, or a Slack
// receiver's URL read from URLEnv when the file loaded. Never log it.
func (n *Notification) Endpoint() string { return cmp.Or(n.endpoint, n.URL) }

// Takes reports whether the receiver subscribes to event.
func (n *Notification) Takes(event string) bool { return slices.Contains(n.Events, event) }

// receiverName keeps receiver names usable as NATS consumer names, metric
// labels and path-like log values.
var receiverName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// notificationYAML is a receiver as the file spells it.
type notificationYAML struct {
	Format    string   `yaml:"format"`
	URL       string   `yaml:"url"`
	URLEnv    string   `yaml:"url_env"`
	SecretEnv string   `yaml:"secret_env"`
	Tenant    string   `yaml:"tenant"`
	Events    []string `yaml:"events"`
}

// notificationsSection converts the notifications: section, by receiver name: nothing there can
// fail to convert, and notifications validates it.
func notificationsSection(doc map[string]notificationYAML) map[string]Notification {
	out := make(map[string]Notification, len(doc))
	for name, n := range doc {
		out[name] = Notification{Name: name, Format: n.Format, URL: n.URL, URLEnv: n.URLEnv, SecretEnv: n.SecretEnv, Tenant: n.Tenant, Events: n.Events}
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
		n := &Notification{Name: name, Format: cmp.Or(strings.TrimSpace(y.Format), FormatStandardWebhooks),
			URL: strings.TrimSpace(y.URL), URLEnv: strings.TrimSpace(y.URLEnv), SecretEnv: strings.TrimSpace(y.SecretEnv), Tenant: strings.TrimSpace(y.Tenant)}
		if !receiverName.MatchString(name) {
			bad("name", "%q may hold only letters, digits, '-' and '_'", name)
		}
		switch n.Format {
		case FormatSlack:
			slackReceiver(n, getenv, bad)
		case FormatStandardWebhooks:
			signedReceiver(n, getenv, bad)
		default:
			bad("format", "%q is not a format; formats are %s (the default) and %s", n.Format, FormatStandardWebhooks, FormatSlack)
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
		out[name] = n
	}
	return out, errs
}

// signedReceiver checks a Standard Webhooks receiver's url and reads its
// secret_env.
func signedReceiver(n *Notification, getenv func(string) string, bad func(field, format string, args ...any)) {
	if n.URLEnv != "" {
		bad("url_env", "is for format %s; this receiver's url is in the file and its events are signed with secret_env", FormatSlack)
	}
	if n.URL == "" {
		bad("url", "is required")
	} else if err := receiverURL(n.URL); err != nil {
		bad("url", "%v", err)
	}
	v, ok := secretVar("secret_env", n.SecretEnv, "the whsec_ signing secret", getenv, bad)
	if !ok {
		return
	}
	if err := webhook.SchemeStandard.CheckSecret([]byte(v)); err != nil {
		bad("secret_env", "environment variable %s: %v", n.SecretEnv, err)
		return
	}
	n.secret = []byte(v)
}

// secretVar reads the variable name holding what (its field is field),
// reporting through bad when there is none, it is not a variable's name
// or it is unset; the value is never shown.
func secretVar(field, name, what string, getenv func(string) string, bad func(field, format string, args ...any)) (string, bool) {
	switch {
	case name == "":
		bad(field, "is required (the variable holding %s)", what)
	case !envNamePattern.MatchString(name):
		// Not quoted: what was written there may be the secret itself.
		bad(field, "is not an environment variable name (give the variable's name, never %s: if this is it, put it in a variable and name that)", what)
	default:
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v, true
		}
		bad(field, "environment variable %s is not set or is empty", name)
	}
	return "", false
}

// slackReceiver reads a Slack receiver's URL from url_env: the URL is the
// secret, so it is neither in the file nor signed.
func slackReceiver(n *Notification, getenv func(string) string, bad func(field, format string, args ...any)) {
	if n.URL != "" {
		bad("url", "a %s receiver's URL is itself a secret: put it in the variable url_env names, not in the file", FormatSlack)
	}
	if n.SecretEnv != "" {
		bad("secret_env", "a %s receiver is not signed (a Slack incoming webhook cannot verify a signature); remove secret_env", FormatSlack)
	}
	v, ok := secretVar("url_env", n.URLEnv, "the Slack incoming webhook's URL", getenv, bad)
	if !ok {
		return
	}
	if err := receiverURL(v); err != nil {
		// The URL is a secret: the error names the variable only.
		bad("url_env", "environment variable %s does not hold an https URL (or http to a loopback host) without credentials", n.URLEnv)
		return
	}
	u, _ := url.Parse(v)
	n.endpoint, n.URL = v, u.Scheme+"://"+u.Host+"/…"
}

// receiverURL says why raw cannot be a receiver's address.
func receiverURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return fmt.Errorf("%q is not an absolute http(s) URL", raw)
	case u.User != nil:
		return errors.New("must not carry credentials: events are signed with secret_env")
	case u.Scheme == "http" && !isLoopback(u.Hostname()):
		return fmt.Errorf("%q is plain http to a host that is not loopback: use https", raw)
	}
	return nil
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
