package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// The streams actledger uses. Each is named <prefix>_<suffix> and takes the
// subjects <prefix>.<token>.>.
const (
	// streamOps carries dispatch messages, one subject per provider so a
	// slow provider's backlog does not block the others.
	streamOps = "OPS"
	// streamReview carries review (exception) items: review.<tenant id>.<reason>.
	streamReview = "REVIEW"
	// streamEvidence carries webhook events and lookup results for the
	// reconciler.
	streamEvidence = "EVIDENCE"
	// streamNotify carries notifications for receivers:
	// notify.<tenant id>.<type>.
	streamNotify = "NOTIFY"
)

// NotifyStream is the name of the notification stream.
func (b *Broker) NotifyStream() string { return b.cfg.Prefix + "_" + streamNotify }

// NotifySubjectPrefix is what notification subjects start with:
// <prefix>.notify, followed by .<tenant id>.<type> (ledger.
// NotificationSubject).
func (s Subjects) NotifySubjectPrefix() string { return s.Prefix + ".notify" }

// NotifySubjectPrefix is what this broker's notification subjects start
// with.
func (b *Broker) NotifySubjectPrefix() string { return b.Subjects().NotifySubjectPrefix() }

// OpsStream is the name of the dispatch stream.
func (b *Broker) OpsStream() string { return b.cfg.Prefix + "_" + streamOps }

// ReviewStream is the name of the review stream.
func (b *Broker) ReviewStream() string { return b.cfg.Prefix + "_" + streamReview }

// EvidenceStream is the name of the evidence stream.
func (b *Broker) EvidenceStream() string { return b.cfg.Prefix + "_" + streamEvidence }

// DispatchSubject is the subject of dispatch messages for provider.
func DispatchSubject(prefix, provider string) string { return prefix + ".ops." + provider }

// Subjects names the subjects of one deployment's streams, those of its
// Prefix. It needs no connection: the ledger, which writes the outbox rows
// published on them, takes it (or a Broker) as its ledger.Subjects, and
// tests of the ledger alone name subjects exactly as the streams take them.
type Subjects struct{ Prefix string }

// DispatchSubject is the subject of dispatch messages for provider.
func (s Subjects) DispatchSubject(provider string) string { return DispatchSubject(s.Prefix, provider) }

// EvidenceSubject is the subject of evidence from provider (see
// Broker.EvidenceSubject).
func (s Subjects) EvidenceSubject(provider string) string { return s.Prefix + ".evidence." + provider }

// ReviewSubjectPrefix is what review subjects start with:
// <prefix>.review, followed by .<tenant id>.<reason>.
func (s Subjects) ReviewSubjectPrefix() string { return s.Prefix + ".review" }

// Subjects names this broker's subjects.
func (b *Broker) Subjects() Subjects { return Subjects{Prefix: b.cfg.Prefix} }

// DispatchSubject is the subject of dispatch messages for provider.
func (b *Broker) DispatchSubject(provider string) string {
	return b.Subjects().DispatchSubject(provider)
}

// EvidenceSubject is the subject of evidence from provider. Provider
// names are subject tokens already (provider.Config validates them). The
// message names a stored row; the reconciler applies the row only if it is
// this provider's.
func (b *Broker) EvidenceSubject(provider string) string {
	return b.Subjects().EvidenceSubject(provider)
}

// EvidenceProvider is the provider an evidence subject names, or "" when
// subject is not one of this broker's evidence subjects.
func (b *Broker) EvidenceProvider(subject string) string {
	p, ok := strings.CutPrefix(subject, b.cfg.Prefix+".evidence.")
	if !ok || p == "" || strings.Contains(p, ".") {
		return ""
	}
	return p
}

func (b *Broker) streamConfigs() []jetstream.StreamConfig {
	storage := jetstream.FileStorage
	if b.cfg.MemoryStorage {
		storage = jetstream.MemoryStorage
	}
	mk := func(suffix, token, desc string) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name:        b.cfg.Prefix + "_" + suffix,
			Description: desc,
			Subjects:    []string{b.cfg.Prefix + "." + token + ".>"},
			Retention:   jetstream.LimitsPolicy,
			Storage:     storage,
			Replicas:    b.cfg.Replicas,
			Duplicates:  b.cfg.Duplicates,
			MaxAge:      b.cfg.MaxAge,
			Discard:     jetstream.DiscardOld,
		}
	}
	return []jetstream.StreamConfig{
		mk(streamOps, "ops", "actledger dispatch messages (one subject per provider)"),
		mk(streamReview, "review", "actledger review items: review.<tenant id>.<reason>"),
		mk(streamEvidence, "evidence", "actledger webhook events and lookup results"),
		mk(streamNotify, "notify", "actledger notifications for receivers: notify.<tenant id>.<type>"),
	}
}

// ensureStreams creates each stream or updates it to the configured
// settings.
func (b *Broker) ensureStreams(ctx context.Context) error {
	for _, cfg := range b.streamConfigs() {
		if _, err := b.js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("broker: create or update stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// DeleteStreams removes the streams (tests clean up with it).
func (b *Broker) DeleteStreams(ctx context.Context) error {
	for _, cfg := range b.streamConfigs() {
		if err := b.js.DeleteStream(ctx, cfg.Name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("broker: delete stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// warnDurability logs, once at start, every way the setup falls short of
// the contract's production rules.
func (b *Broker) warnDurability(ctx context.Context) {
	var memory, fewReplicas []string
	replicas := 0
	for _, cfg := range b.streamConfigs() {
		info, err := b.js.Stream(ctx, cfg.Name)
		if err != nil {
			continue
		}
		c := info.CachedInfo().Config
		if c.Storage != jetstream.FileStorage {
			memory = append(memory, c.Name)
		}
		if c.Replicas < 3 {
			fewReplicas = append(fewReplicas, c.Name)
			replicas = c.Replicas
		}
	}
	if len(memory) > 0 {
		b.logger.WarnContext(ctx, "streams use memory storage: acknowledged messages are lost on restart", "streams", memory)
	}
	if len(fewReplicas) > 0 {
		b.logger.WarnContext(ctx, "streams have fewer than 3 replicas (production needs 3): a node loss can lose acknowledged messages; the ledger re-publishes what it must",
			"streams", fewReplicas, "replicas", replicas)
	}
	if b.embedded == nil {
		b.logger.WarnContext(ctx, "cannot verify the remote server's sync_interval; production needs 'jetstream { sync_interval: always }'",
			"server_version", b.ServerVersion())
	}
}

// ReviewSubjectPrefix is what review subjects start with:
// <prefix>.review, followed by .<tenant id>.<reason>.
func (b *Broker) ReviewSubjectPrefix() string { return b.Subjects().ReviewSubjectPrefix() }
