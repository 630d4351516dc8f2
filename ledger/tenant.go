package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

const (
	tenantIDByName = `SELECT id FROM tenants WHERE name = $1`

	// tenantEnsure creates the tenant named $2 unless it exists, and
	// returns its id either way.
	tenantEnsure = `INSERT INTO tenants (id, name) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
RETURNING id`
)

// EnsureTenant returns the id of the tenant named name, creating the
// tenant if it does not exist yet: a provider's config may name its tenant
// before anyone has a token for it, and evidence for it is kept for that
// tenant from the start.
func (s *Store) EnsureTenant(ctx context.Context, name string) (uuid.UUID, error) {
	var id uuid.UUID
	if err := s.pool.QueryRow(ctx, tenantEnsure, uuid.New(), name).Scan(&id); err != nil {
		return uuid.Nil, fmt.Errorf("ensure tenant %q: %w", name, err)
	}
	return id, nil
}

// TenantID returns the id of the tenant named name, or ErrNotFound.
func (s *Store) TenantID(ctx context.Context, name string) (uuid.UUID, error) {
	var id uuid.UUID
	err := s.pool.QueryRow(ctx, tenantIDByName, name).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return uuid.Nil, ErrNotFound
	}
	return id, err
}
