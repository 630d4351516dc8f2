package auth

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultSessionLifetime is how long a console session lasts at most
// after sign-in, whatever the browser does.
const DefaultSessionLifetime = 8 * time.Hour

// sessionPrefix marks a console session id, so it is never taken for a
// token (and a token never for a session id).
const sessionPrefix = "als_"

const (
	sessionInsert = `INSERT INTO console_sessions (id_hash, token_id, expires_at)
VALUES ($1, $2, now() + $3::bigint * interval '1 microsecond')`

	// sessionsExpiredDelete removes the sessions that ended on their own;
	// each sign-in runs it, so the table holds only live sessions and
	// those of the last few hours.
	sessionsExpiredDelete = `DELETE FROM console_sessions WHERE expires_at <= now()`

	// personSessionInsert starts a person's session (schema 039).
	personSessionInsert = `INSERT INTO console_sessions (id_hash, tenant_id, role, scope, person, expires_at)
VALUES ($1, $2, $3, nullif($4, ''), $5, $6)`

	// sessionAuthenticate is tokenAuthenticate for a session: the
	// session unexpired and, for a token's, its token unrevoked.
	sessionAuthenticate = `SELECT coalesce(k.id, '00000000-0000-0000-0000-000000000000'::uuid), coalesce(k.name, ''),
    t.id, t.name, coalesce(k.role, s.role), coalesce(k.scope, s.scope, ''), s.person
FROM console_sessions s
LEFT JOIN api_tokens k ON k.id = s.token_id
JOIN tenants t ON t.id = coalesce(k.tenant_id, s.tenant_id)
WHERE s.id_hash = $1 AND s.expires_at > now()
  AND (s.token_id IS NULL OR k.revoked_at IS NULL)`

	sessionDelete = `DELETE FROM console_sessions WHERE id_hash = $1`

	// personSessionsDelete ends the sessions of the person issuer $1 (NULL:
	// any) signed in as subject $2 (NULL: every person).
	personSessionsDelete = `DELETE FROM console_sessions
WHERE person IS NOT NULL
  AND ($1::text IS NULL OR person->>'issuer' = $1)
  AND ($2::text IS NULL OR person->>'subject' = $2)`

	// sessionsOfTokenDelete ends every session of a revoked token.
	sessionsOfTokenDelete = `DELETE FROM console_sessions WHERE token_id = $1`
)

// StartSession begins a console session of p (a principal Authenticate
// returned) that lasts at most lifetime, and returns its secret id for the
// browser's cookie. Only the id's SHA-256 is stored: a leaked database
// holds no usable session. Expired sessions are deleted on the way.
func (t *Tokens) StartSession(ctx context.Context, p Principal, lifetime time.Duration) (string, error) {
	if lifetime <= 0 {
		return "", fmt.Errorf("auth: session lifetime %s must be positive", lifetime)
	}
	return t.startSession(ctx, p.Name, sessionInsert, p.TokenID, lifetime.Microseconds())
}

// StartPersonSession begins a console session of a person the identity
// provider signed in and an access rule admitted, as p (Person set, no
// token), that ends at expires (the ID token's expiry or the session
// lifetime, whichever the caller found first). It returns the session's
// secret id for the browser's cookie, stored as StartSession stores it.
func (t *Tokens) StartPersonSession(ctx context.Context, p Principal, expires time.Time) (string, error) {
	if p.Person == nil {
		return "", errors.New("auth: a person's session needs the person")
	}
	if p.Role != RoleApprover && p.Role != RoleOperator {
		return "", fmt.Errorf("auth: a person may be an approver or an operator, not %s", p.Role)
	}
	return t.startSession(ctx, p.Actor(), personSessionInsert, p.TenantID, p.Role, p.Scope, p.Person, expires)
}

// startSession makes a new session id and stores its hash with insert
// (its first argument the hash, then args), deleting the expired
// sessions in the same transaction; who names the session's owner in an
// error.
func (t *Tokens) startSession(ctx context.Context, who, insert string, args ...any) (string, error) {
	secret, h, err := newSessionID()
	if err != nil {
		return "", err
	}
	err = pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sessionsExpiredDelete); err != nil {
			return fmt.Errorf("auth: delete expired sessions: %w", err)
		}
		if _, err := tx.Exec(ctx, insert, append([]any{h[:]}, args...)...); err != nil {
			return fmt.Errorf("auth: start a session of %s: %w", who, err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return secret, nil
}

// newSessionID is a new session's secret id and its SHA-256.
func newSessionID() (string, [32]byte, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", [32]byte{}, fmt.Errorf("auth: random session id: %w", err)
	}
	secret := sessionPrefix + base64.RawURLEncoding.EncodeToString(raw)
	return secret, hash(secret), nil
}

// Session returns the principal of the session secret names: one that
// has not expired, was not ended, and whose token is not revoked;
// otherwise ErrUnauthenticated. It asks the database on every call, as
// for people's tokens: nothing later re-checks a person's decision.
func (t *Tokens) Session(ctx context.Context, secret string) (Principal, error) {
	if !strings.HasPrefix(secret, sessionPrefix) {
		return Principal{}, ErrUnauthenticated
	}
	h := hash(secret)
	var p Principal
	err := t.pool.QueryRow(ctx, sessionAuthenticate, h[:]).Scan(&p.TokenID, &p.Name, &p.TenantID, &p.Tenant, &p.Role, &p.Scope, &p.Person)
	if errors.Is(err, pgx.ErrNoRows) {
		return Principal{}, ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, fmt.Errorf("auth: look up session: %w", err)
	}
	if p.Person != nil {
		// A person has no token name: pages and logs name them.
		p.Name = cmp.Or(p.Person.Name, p.Person.Email, p.Person.Subject)
	}
	return p, nil
}

// EndSession ends the session secret names (sign-out): from then on it
// authenticates nothing, in every process. Ending one that does not exist
// is not an error.
func (t *Tokens) EndSession(ctx context.Context, secret string) error {
	if !strings.HasPrefix(secret, sessionPrefix) {
		return nil
	}
	h := hash(secret)
	if _, err := t.pool.Exec(ctx, sessionDelete, h[:]); err != nil {
		return fmt.Errorf("auth: end session: %w", err)
	}
	return nil
}

// EndPersonSessions ends, in every process, the console sessions of the
// person subject signed in by issuer (issuer "": any issuer), or of every
// person when subject is "": the off switch for someone who leaves, whose
// session would otherwise run until their ID token expires. It returns how
// many ended.
func (t *Tokens) EndPersonSessions(ctx context.Context, issuer, subject string) (int64, error) {
	tag, err := t.pool.Exec(ctx, personSessionsDelete, nullIfEmpty(issuer), nullIfEmpty(subject))
	if err != nil {
		return 0, fmt.Errorf("auth: end people's sessions: %w", err)
	}
	return tag.RowsAffected(), nil
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
