package sso

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/oauth2"
)

// Defaults of Config.
const (
	// DefaultPendingLifetime is how long a person has, from the redirect
	// to the identity provider, to come back.
	DefaultPendingLifetime = 10 * time.Minute
	// DefaultHTTPTimeout bounds each request to the identity provider.
	DefaultHTTPTimeout = 10 * time.Second
	// DefaultMaxPending bounds the sign-ins under way at once: far more
	// than an organisation's people start in DefaultPendingLifetime,
	// few enough rows that a flood of starts by anyone (the start needs
	// no credential) cannot grow the table without bound.
	DefaultMaxPending = 10000
)

// CallbackPath is the console's path the identity provider redirects to:
// the redirect URL to register is the console's URL + "/oidc/callback".
const CallbackPath = "/console/oidc/callback"

// Errors callers branch on.
var (
	// ErrIssuerDown: the identity provider's discovery document, keys or
	// token endpoint could not be reached or read.
	ErrIssuerDown = errors.New("sso: the identity provider cannot be reached")
	// ErrNoPendingSignIn: the callback's state names no sign-in this
	// browser started (none at all, one used already, one expired, or
	// another browser's).
	ErrNoPendingSignIn = errors.New("sso: no sign-in of this browser is pending with that state")
	// ErrRefused: the identity provider's answer does not prove who the
	// person is (no ID token, a bad signature, another audience or
	// issuer, expired, a nonce other than this sign-in's).
	ErrRefused = errors.New("sso: the identity provider's answer was refused")
	// ErrTooManyPending: Config.MaxPending sign-ins are under way; a
	// new one can start when one finishes or expires.
	ErrTooManyPending = errors.New("sso: too many sign-ins are under way")
)

// Config configures a SignIn.
type Config struct {
	// Access is the compiled access: section (required).
	Access *Access
	// ConsoleURL is the console's address as a browser reaches it, e.g.
	// https://actledger.example.com/console (required): the redirect URL
	// is ConsoleURL + "/oidc/callback".
	ConsoleURL string
	// Pool holds the pending sign-ins (required).
	Pool *pgxpool.Pool
	// HTTPClient talks to the identity provider. Default a client with
	// DefaultHTTPTimeout.
	HTTPClient *http.Client
	// PendingLifetime is how long a started sign-in may take. Default
	// DefaultPendingLifetime.
	PendingLifetime time.Duration
	// MaxPending is how many sign-ins may be under way at once. Default
	// DefaultMaxPending.
	MaxPending int
}

// SignIn is the console's relying party.
type SignIn struct {
	cfg      Config
	redirect string

	mu       sync.Mutex
	provider *oidc.Provider
}

// New returns a SignIn. It does not reach the identity provider: one that
// is down when serve starts must not stop the console, whose token sign-in
// still works; discovery happens at the first sign-in and is kept once it
// succeeds.
func New(cfg Config) (*SignIn, error) {
	switch {
	case cfg.Access == nil:
		return nil, errors.New("sso: Config.Access is required")
	case cfg.Pool == nil:
		return nil, errors.New("sso: Config.Pool is required")
	case cfg.PendingLifetime < 0:
		return nil, fmt.Errorf("sso: Config.PendingLifetime %s must not be negative", cfg.PendingLifetime)
	case cfg.MaxPending < 0:
		return nil, fmt.Errorf("sso: Config.MaxPending %d must not be negative", cfg.MaxPending)
	}
	u, err := url.Parse(cfg.ConsoleURL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("sso: Config.ConsoleURL %q is not the console's http(s) URL", cfg.ConsoleURL)
	}
	cfg.PendingLifetime = cmp.Or(cfg.PendingLifetime, DefaultPendingLifetime)
	cfg.MaxPending = cmp.Or(cfg.MaxPending, DefaultMaxPending)
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	return &SignIn{cfg: cfg, redirect: strings.TrimSuffix(cfg.ConsoleURL, "/") + "/oidc/callback"}, nil
}

// Issuer is the identity provider's issuer URL, for pages that name it.
func (s *SignIn) Issuer() string { return s.cfg.Access.Issuer }

// Origin is the issuer's origin (scheme://host[:port]), where the
// console's sign-in form sends the browser.
func (s *SignIn) Origin() string {
	origins := []string{origin(s.cfg.Access.Issuer)}
	s.mu.Lock()
	if s.provider != nil {
		// The login page may live on another host than the issuer.
		if o := origin(s.provider.Endpoint().AuthURL); o != origins[0] {
			origins = append(origins, o)
		}
	}
	s.mu.Unlock()
	return strings.Join(origins, " ")
}

func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// PendingLifetime is how long a started sign-in may take.
func (s *SignIn) PendingLifetime() time.Duration { return s.cfg.PendingLifetime }

// RedirectURL is the URL to register with the identity provider.
func (s *SignIn) RedirectURL() string { return s.redirect }

// Access is the compiled access: section the sign-in was built with.
func (s *SignIn) Access() *Access { return s.cfg.Access }

func (s *SignIn) client(ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, s.cfg.HTTPClient)
}

// discover reads the issuer's discovery document once it can.
func (s *SignIn) discover(ctx context.Context) (*oidc.Provider, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.provider != nil {
		return s.provider, nil
	}
	p, err := oidc.NewProvider(s.client(ctx), s.cfg.Access.Issuer)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrIssuerDown, s.cfg.Access.Issuer, err)
	}
	// The discovery document names where the browser, the code, the
	// client secret and the verifier go, and where the keys come from:
	// each is held to the issuer's own rule (https, or http on a loopback
	// host), so no secret travels in clear on the document's say-so.
	var doc struct {
		JWKS string `json:"jwks_uri"`
	}
	if err := p.Claims(&doc); err != nil {
		return nil, fmt.Errorf("%w: %s: discovery document: %w", ErrIssuerDown, s.cfg.Access.Issuer, err)
	}
	for name, u := range map[string]string{"authorization_endpoint": p.Endpoint().AuthURL, "token_endpoint": p.Endpoint().TokenURL, "jwks_uri": doc.JWKS} {
		if err := checkIssuer(u); err != nil {
			return nil, fmt.Errorf("%w: %s: the discovery document's %s %w", ErrIssuerDown, s.cfg.Access.Issuer, name, err)
		}
	}
	s.provider = p
	return p, nil
}

func (s *SignIn) oauth2(p *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{
		ClientID: s.cfg.Access.ClientID, ClientSecret: s.cfg.Access.ClientSecret(),
		Endpoint: p.Endpoint(), RedirectURL: s.redirect,
		Scopes: append([]string{oidc.ScopeOpenID}, s.cfg.Access.Scopes...),
	}
}

const (
	pendingExpiredDelete = `DELETE FROM signin_pending WHERE expires_at <= now()`
	// pendingInsert records a sign-in unless MaxPending ($7) are under
	// way (the expired ones were just deleted). Concurrent starts may
	// each count the others' rows as not there yet: the bound holds to
	// within the starts in flight at once.
	pendingInsert = `INSERT INTO signin_pending (state_hash, browser_hash, nonce, verifier, return_to, expires_at)
SELECT $1, $2, $3, $4, $5, now() + $6::bigint * interval '1 microsecond'
WHERE (SELECT count(*) FROM signin_pending) < $7`
	// pendingTake reads a pending sign-in and deletes it in one
	// statement: a state is used once, whatever happens next.
	pendingTake = `DELETE FROM signin_pending WHERE state_hash = $1 AND browser_hash = $2
RETURNING nonce, verifier, return_to, expires_at > now()`
)

// Started is a sign-in on its way to the identity provider.
type Started struct {
	// AuthURL is where the browser goes next.
	AuthURL string
	// Browser is the secret of the pending-sign-in cookie: the callback
	// must come back with it.
	Browser string
}

// Begin starts a sign-in that will come back to the console path
// returnTo (ReturnPath: anything else is the overview).
func (s *SignIn) Begin(ctx context.Context, returnTo string) (Started, error) {
	p, err := s.discover(ctx)
	if err != nil {
		return Started{}, err
	}
	state, browser, nonce := randomString(), randomString(), randomString()
	verifier := oauth2.GenerateVerifier()
	sh, bh := sha256.Sum256([]byte(state)), sha256.Sum256([]byte(browser))
	err = pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, pendingExpiredDelete); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, pendingInsert, sh[:], bh[:], nonce, verifier, ReturnPath(returnTo), s.cfg.PendingLifetime.Microseconds(), s.cfg.MaxPending)
		if err == nil && tag.RowsAffected() == 0 {
			return ErrTooManyPending
		}
		return err
	})
	if errors.Is(err, ErrTooManyPending) {
		return Started{}, err
	}
	if err != nil {
		return Started{}, fmt.Errorf("sso: record the sign-in: %w", err)
	}
	authURL := s.oauth2(p).AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier))
	return Started{AuthURL: authURL, Browser: browser}, nil
}

// Identity is who the identity provider signed in.
type Identity struct {
	Issuer, Subject, Email, Name string
	// Claims are the ID token's, for the access rules.
	Claims map[string]any
	// Expiry is the ID token's: the session ends then at the latest.
	Expiry time.Time
	// ReturnTo is the console path the sign-in began on.
	ReturnTo string
}

// Finish completes the sign-in that browser (the pending-sign-in
// cookie's secret) began with state, exchanging code with the PKCE
// verifier and verifying the ID token: signature with the issuer's keys,
// issuer, audience, expiry (go-oidc), and the nonce of this sign-in.
func (s *SignIn) Finish(ctx context.Context, browser, state, code string) (Identity, error) {
	var nonce, verifier, returnTo string
	var live bool
	if browser == "" || state == "" {
		return Identity{}, ErrNoPendingSignIn
	}
	// Taken by state and browser together: a state that leaked elsewhere
	// (a log, a referrer) can neither finish nor cancel this browser's
	// sign-in.
	sh, bh := sha256.Sum256([]byte(state)), sha256.Sum256([]byte(browser))
	err := s.cfg.Pool.QueryRow(ctx, pendingTake, sh[:], bh[:]).Scan(&nonce, &verifier, &returnTo, &live)
	if errors.Is(err, pgx.ErrNoRows) {
		return Identity{}, ErrNoPendingSignIn
	}
	if err != nil {
		return Identity{}, fmt.Errorf("sso: read the pending sign-in: %w", err)
	}
	if !live || nonce == "" {
		return Identity{}, ErrNoPendingSignIn
	}
	p, err := s.discover(ctx)
	if err != nil {
		return Identity{}, err
	}
	tok, err := s.oauth2(p).Exchange(s.client(ctx), code, oauth2.VerifierOption(verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return Identity{}, fmt.Errorf("%w: the token endpoint refused the code: %s", ErrRefused, re.ErrorCode)
		}
		return Identity{}, fmt.Errorf("%w: token endpoint: %w", ErrIssuerDown, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Identity{}, fmt.Errorf("%w: no ID token in the token response", ErrRefused)
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: s.cfg.Access.ClientID}).Verify(s.client(ctx), raw)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		return Identity{}, fmt.Errorf("%w: the ID token's nonce is not this sign-in's", ErrRefused)
	}
	if idt.Subject == "" {
		return Identity{}, fmt.Errorf("%w: the ID token names no subject", ErrRefused)
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return Identity{}, fmt.Errorf("%w: claims: %w", ErrRefused, err)
	}
	// The email names the person only when the identity provider says it
	// verified it: one a person may set (or an unverified one) would let
	// them be named, in the history, as someone else. The rules still see
	// every claim, email_verified included.
	email, _ := claims["email"].(string)
	if !verified(claims["email_verified"]) {
		email = ""
	}
	name, _ := claims["name"].(string)
	return Identity{Issuer: idt.Issuer, Subject: idt.Subject, Email: email, Name: name,
		Claims: claims, Expiry: idt.Expiry, ReturnTo: returnTo}, nil
}

// ReturnPath is raw if it is a path of the console, else the overview:
// a sign-in never sends the browser to another site, whatever the
// address it began with said ("//evil.example", "https://…", "/\evil").
func ReturnPath(raw string) string {
	const home = "/console/"
	if len(raw) > maxReturnPath {
		return home
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || strings.HasPrefix(raw, "//") ||
		strings.ContainsAny(raw, "\\\r\n\t") || !strings.HasPrefix(u.Path, home) || strings.Contains(u.Path, "/../") {
		return home
	}
	return u.RequestURI()
}

// maxReturnPath bounds the path a pending sign-in keeps: a console
// address is short, and a sign-in anyone may start must not store much.
const maxReturnPath = 512

// verified reads email_verified, a boolean, or the string "true" some
// identity providers send.
func verified(v any) bool {
	switch b := v.(type) {
	case bool:
		return b
	case string:
		return b == "true"
	}
	return false
}

func randomString() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}
