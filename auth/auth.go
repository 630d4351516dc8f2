// Package auth issues, checks and revokes API tokens.
//
// A token belongs to one tenant and has one role. Only its SHA-256 hash is
// stored: tokens are 256 random bits, so a fast hash cannot be brute-forced,
// and a leaked database leaks no usable token. Tokens are never logged.
//
// A token may also have an access scope inside its tenant (a department, a
// team; CreateScoped): it then sees and acts on its own scope's objects
// only, and a token without one sees its whole tenant. Principal.Access
// carries the scope to the ledger, whose queries keep the rule.
//
// Authenticate keeps the principals of agent tokens for a second
// (Config.CacheTTL), by hash, so an agent's requests do not each cost a
// query. Revoke announces the revoked token in its transaction
// (RevocationChannel), and every process whose Tokens listens (Start)
// evicts it when the revocation commits; the cache serves tokens only
// while that listener is connected. It must never cache a failed lookup,
// nor an approver's or an operator's token: nothing later re-checks a
// person's decision. An agent's work is re-checked: the dispatcher finds
// the requesting token revoked right before any call
// (ledger.LapseTokenRevoked), so should a revocation's notification never
// arrive, what the agent asks for within the TTL is held, never sent.
package auth

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/internal/startstop"
	"github.com/actledger/actledger/internal/ttlcache"
	"github.com/actledger/actledger/ledger"
)

// Role is what a token may do.
type Role string

// The roles of the contract.
const (
	RoleAgent    Role = "agent"    // proposes operations and reads them
	RoleApprover Role = "approver" // grants and revokes approvals
	RoleOperator Role = "operator" // works the review queue and the stop button
	// RoleMetrics scrapes GET /metrics and does nothing else: a monitoring
	// system's token. The metrics count every tenant's work, so they are
	// not shown to a tenant's agents, approvers or operators.
	RoleMetrics Role = "metrics"
)

// Roles are every role, in the order documents list them; the schema's
// CHECK on api_tokens.role names the same.
var Roles = []Role{RoleAgent, RoleApprover, RoleOperator, RoleMetrics}

// Valid reports whether r is one of the Roles.
func (r Role) Valid() bool { return slices.Contains(Roles, r) }

// Errors callers branch on.
var (
	// ErrUnauthenticated: no token, an unknown token, or a revoked one.
	ErrUnauthenticated = errors.New("auth: invalid or revoked token")
	// ErrNotFound: no token with that name or id.
	ErrNotFound = errors.New("auth: no such token")
	// ErrNameTaken: a token of that name exists already, in this tenant or
	// another. Names are unique across tenants so that revoking by name
	// can never hit the wrong token.
	ErrNameTaken = errors.New("auth: a token with this name already exists")
)

// uniqueViolation is the SQLSTATE of a unique-constraint violation, and
// tokenNameUnique the constraint that keeps token names unique.
const (
	uniqueViolation = "23505"
	tokenNameUnique = "api_tokens_name_key"
)

// Principal is the authenticated caller of a request.
type Principal struct {
	TokenID  uuid.UUID
	Name     string
	TenantID uuid.UUID
	Tenant   string
	Role     Role
	// Scope is the token's access scope inside its tenant; empty: the
	// whole tenant.
	Scope string
	// Person is who signed in with the organisation's identity provider;
	// nil for a token. A person's principal has no token (TokenID is
	// uuid.Nil): their tenant, role and scope are what the access rule
	// that admitted them gave.
	Person *Person
}

// Person is a signed-in person as the identity provider's verified ID
// token names them.
type Person = ledger.Person

// Actor names the principal in operation events: "person:<email or
// subject>" for a person, "<role>:<token name>" for a token.
func (p Principal) Actor() string {
	if p.Person != nil {
		return p.Person.Actor()
	}
	return string(p.Role) + ":" + p.Name
}

// Access is what the principal may see and act on in the ledger: its
// tenant, narrowed to its scope when it has one. Every request reads and
// decides through it, so a scoped token's answers are its scope's alone.
func (p Principal) Access() ledger.Access {
	return ledger.Access{Tenant: p.TenantID, Scope: p.Scope}
}

// maxNameLength bounds a token name: it is shown in events ("agent:<name>")
// and logs, and Postgres cannot store U+0000 in it at all.
const maxNameLength = 128

// MaxScopeLength bounds an access scope, in characters (schema 024
// checks the same).
const MaxScopeLength = 64

// CheckScope says why scope cannot be an access scope: it must be 1 to
// MaxScopeLength characters, each one visible (a letter, mark, digit,
// punctuation or symbol: no space, control or format character, so no
// zero-width or right-to-left character makes two scopes look alike, or
// one look like none). Scopes are compared exactly, case included.
func CheckScope(scope string) error {
	n := 0
	for _, r := range scope {
		n++
		if r == utf8.RuneError || !unicode.IsGraphic(r) || unicode.IsSpace(r) {
			return fmt.Errorf("auth: scope %q must hold visible characters only (no space, control or invisible character)", scope)
		}
	}
	if n == 0 || n > MaxScopeLength {
		return fmt.Errorf("auth: scope must be 1 to %d characters, got %d", MaxScopeLength, n)
	}
	return nil
}

// tokenPrefix makes actledger tokens recognisable to secret scanners.
const tokenPrefix = "alt_"

const (
	tenantUpsert = `INSERT INTO tenants (id, name) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
RETURNING id`

	tokenInsert = `INSERT INTO api_tokens (id, tenant_id, name, role, token_hash, scope) VALUES ($1, $2, $3, $4, $5, $6)`

	tokenAuthenticate = `SELECT k.id, k.name, k.tenant_id, t.name, k.role, coalesce(k.scope, '')
FROM api_tokens k JOIN tenants t ON t.id = k.tenant_id
WHERE k.token_hash = $1 AND k.revoked_at IS NULL`

	// tokenRevoke ends exactly one token: the one whose id is $1, else the
	// one named $1 (Create refuses names that read as an id, but a
	// database may hold one from before).
	tokenRevoke = `UPDATE api_tokens SET revoked_at = coalesce(revoked_at, now())
WHERE id = (SELECT id FROM api_tokens WHERE id::text = $1 OR name = $1 ORDER BY id::text = $1 DESC LIMIT 1)
RETURNING id, name, token_hash`
)

// Defaults of Config, applied by New to the zero fields.
const (
	// DefaultCacheTTL is how long an agent token that authenticated is
	// trusted without asking the database again. A revocation evicts it
	// at once (see Start); the TTL bounds only a revocation whose
	// notification never arrived.
	DefaultCacheTTL = time.Second
	// DefaultCacheSize bounds the agent tokens cached at once; at the
	// bound the oldest entry makes room.
	DefaultCacheSize = 10_000
)

// NoCache as Config.CacheTTL checks every request's token in the
// database. Any negative CacheTTL does the same.
const NoCache time.Duration = -1

// MaxCacheTTL bounds Config.CacheTTL: should a revocation's notification
// never arrive, a revoked agent token could read its tenant's operations
// in other processes for that long.
const MaxCacheTTL = time.Minute

// Config configures Tokens. Zero values mean the Default… constants.
type Config struct {
	// CacheTTL is how long Authenticate trusts an agent token it found,
	// without a query (DefaultCacheTTL, at most MaxCacheTTL). Negative
	// (NoCache): never.
	CacheTTL time.Duration
	// CacheSize is how many agent tokens are cached at most
	// (DefaultCacheSize).
	CacheSize int
	Logger    *slog.Logger
}

// WithDefaults returns cfg with each zero field at its default (the
// Default… constants), as New applies it.
func (cfg Config) WithDefaults() Config {
	cfg.CacheTTL = cmp.Or(cfg.CacheTTL, DefaultCacheTTL)
	cfg.CacheSize = cmp.Or(cfg.CacheSize, DefaultCacheSize)
	return cfg
}

// validate reports the first unusable field of a config with defaults
// applied, by name.
func (cfg Config) validate() error {
	switch {
	case cfg.CacheTTL > MaxCacheTTL:
		return fmt.Errorf("auth: Config.CacheTTL %s must be at most %s: a revoked token is served that long", cfg.CacheTTL, MaxCacheTTL)
	case cfg.CacheSize < 0:
		return fmt.Errorf("auth: Config.CacheSize %d must not be negative", cfg.CacheSize)
	}
	return nil
}

// Tokens issues and checks tokens.
type Tokens struct {
	pool   *pgxpool.Pool
	ledger *ledger.Store
	log    *slog.Logger
	// cache is nil with Config.CacheTTL < 0. It serves tokens only while
	// live: while the revocation listener (Start) is connected.
	cache *ttlcache.Cache[tokenHash, Principal]
	live  atomic.Bool
	svc   startstop.Loop
}

// New returns Tokens over pool; store holds the operations a revoked token
// leaves behind. It fails on a Config that validate refuses.
func New(pool *pgxpool.Pool, store *ledger.Store, cfg Config) (*Tokens, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	t := &Tokens{pool: pool, ledger: store, log: cmp.Or(cfg.Logger, slog.Default()).With("component", "auth")}
	if cfg.CacheTTL > 0 {
		t.cache = ttlcache.New[tokenHash, Principal](cfg.CacheTTL, cfg.CacheSize)
	}
	return t, nil
}

// Created is a newly issued token. Secret is shown once and never stored.
type Created struct {
	ID     uuid.UUID
	Name   string
	Secret string
}

// Create issues a token for tenant (created if new) with role, without a
// scope: it sees the whole tenant. An empty name gets a generated one; a
// name already in use, in any tenant, is ErrNameTaken, and then nothing is
// created (not even the tenant).
func (t *Tokens) Create(ctx context.Context, tenant string, role Role, name string) (Created, error) {
	return t.create(ctx, tenant, role, name, nil)
}

// CreateScoped is Create for a token with the access scope scope (see
// CheckScope): it sees and acts on that scope's operations, approval
// requests, review items and events only.
func (t *Tokens) CreateScoped(ctx context.Context, tenant string, role Role, name, scope string) (Created, error) {
	if err := CheckScope(scope); err != nil {
		return Created{}, err
	}
	return t.create(ctx, tenant, role, name, &scope)
}

func (t *Tokens) create(ctx context.Context, tenant string, role Role, name string, scope *string) (Created, error) {
	if strings.TrimSpace(tenant) == "" || len(tenant) > 128 {
		return Created{}, fmt.Errorf("auth: tenant name must be 1 to 128 characters, got %q", tenant)
	}
	if !role.Valid() {
		return Created{}, fmt.Errorf("auth: role %q is not one of agent, approver, operator, metrics", role)
	}
	if len(name) > maxNameLength || strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return Created{}, fmt.Errorf("auth: token name must be at most %d bytes of printable text (no U+0000 or other control characters)", maxNameLength)
	}
	if _, err := uuid.Parse(name); err == nil {
		// `token revoke NAME|ID` must name one token: a name that reads as
		// an id could be another token's.
		return Created{}, fmt.Errorf("auth: token name %q reads as a token id; choose a name that does not", name)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return Created{}, fmt.Errorf("auth: random token: %w", err)
	}
	secret := tokenPrefix + base64.RawURLEncoding.EncodeToString(raw)
	id := uuid.Must(uuid.NewV7())
	if name == "" {
		name = fmt.Sprintf("%s-%s-%s", tenant, role, id.String()[24:])
	}
	err := pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		var tenantID uuid.UUID
		if err := tx.QueryRow(ctx, tenantUpsert, uuid.Must(uuid.NewV7()), tenant).Scan(&tenantID); err != nil {
			return fmt.Errorf("auth: create tenant %s: %w", tenant, err)
		}
		h := hash(secret)
		_, err := tx.Exec(ctx, tokenInsert, id, tenantID, name, role, h[:], scope)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == uniqueViolation && pgErr.ConstraintName == tokenNameUnique {
			return fmt.Errorf("%w: %q", ErrNameTaken, name)
		}
		if err != nil {
			return fmt.Errorf("auth: create token %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return Created{}, err
	}
	return Created{ID: id, Name: name, Secret: secret}, nil
}

// Authenticate returns the principal of an unrevoked token, or
// ErrUnauthenticated. An agent token found within the cache's TTL is not
// looked up again; every other token is, on every call.
func (t *Tokens) Authenticate(ctx context.Context, secret string) (Principal, error) {
	if !strings.HasPrefix(secret, tokenPrefix) {
		return Principal{}, ErrUnauthenticated
	}
	h := hash(secret)
	var generation ttlcache.Generation
	caching := t.cache != nil && t.live.Load()
	if caching {
		p, ok, gen := t.cache.Get(h)
		if ok {
			return p, nil
		}
		generation = gen
	}
	var p Principal
	err := t.pool.QueryRow(ctx, tokenAuthenticate, h[:]).Scan(&p.TokenID, &p.Name, &p.TenantID, &p.Tenant, &p.Role, &p.Scope)
	if errors.Is(err, pgx.ErrNoRows) {
		return Principal{}, ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, fmt.Errorf("auth: look up token: %w", err)
	}
	if caching && p.Role == RoleAgent {
		t.cache.Put(h, p, generation)
	}
	return p, nil
}

// Revoke ends the token named nameOrID: from then on it authenticates
// nothing (its console sessions are deleted with it), and the operations it requested that were never executed become
// held in the same transaction. An approver's token takes its decisions
// with it: every approval it granted is revoked, and the never-executed
// operations under them are held too (ledger.RevokeApprovalsOfApprover).
// It returns every operation it held. The revocation is announced in the
// same transaction (RevocationChannel): every listening process's cache,
// this one's included, forgets the token when it commits, and Revoke
// returns only revocationSettle after the commit, once they have.
func (t *Tokens) Revoke(ctx context.Context, nameOrID, actor string) ([]ledger.Operation, error) {
	if strings.ContainsRune(nameOrID, 0) {
		// No name holds U+0000 (Create refuses it), and Postgres would
		// refuse the query.
		return nil, ErrNotFound
	}
	var held []ledger.Operation
	var revoked []byte
	err := pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		var id uuid.UUID
		var name string
		err := tx.QueryRow(ctx, tokenRevoke, nameOrID).Scan(&id, &name, &revoked)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("auth: revoke %s: %w", nameOrID, err)
		}
		if _, err := tx.Exec(ctx, tokenRevokedNotify, revoked); err != nil {
			return fmt.Errorf("auth: announce the revocation of %s: %w", nameOrID, err)
		}
		if _, err := tx.Exec(ctx, sessionsOfTokenDelete, id); err != nil {
			return fmt.Errorf("auth: end the console sessions of %s: %w", nameOrID, err)
		}
		held, err = t.ledger.HoldUnsentByToken(ctx, tx, id, actor)
		if err != nil {
			return err
		}
		// A token of another role granted no approvals: this changes
		// nothing for it.
		_, approved, err := t.ledger.RevokeApprovalsOfApprover(ctx, tx, id, actor)
		held = append(held, approved...)
		return err
	})
	if err != nil {
		return held, err
	}
	if t.cache != nil {
		// After the commit: a lookup from now on finds the token
		// revoked, and one under way keeps nothing (tokenCache.evict).
		var key tokenHash
		copy(key[:], revoked)
		t.cache.Evict(key)
	}
	// Other processes evict it when the announcement reaches them.
	timer := time.NewTimer(revocationSettle)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	return held, nil
}

// tokenHash is a token's SHA-256: the cache's key, so the cache holds no
// secret either.
type tokenHash [32]byte

func hash(secret string) tokenHash {
	return sha256.Sum256([]byte(secret))
}
