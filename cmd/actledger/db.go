package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/localpg"
	"github.com/actledger/actledger/schema"
)

// openDatabase finds the database (localpg when DATABASE_URL is unset),
// connects and applies migrations. stop releases a private cluster.
func openDatabase(ctx context.Context, e env, logger *slog.Logger) (pool *pgxpool.Pool, stop func(), err error) {
	dbURL, stopPG, err := localpg.Ensure(ctx, localpg.Config{URL: e.DatabaseURL, Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		stopPG()
		return nil, nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	if cfg.MaxConns < 16 {
		cfg.MaxConns = 32
	}
	schema.ConfigurePool(cfg)
	pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		stopPG()
		return nil, nil, fmt.Errorf("connect to Postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		stopPG()
		return nil, nil, fmt.Errorf("connect to Postgres at %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	repl, err := readReplication(ctx, pool)
	if err == nil && repl.InRecovery {
		err = errStandby
	}
	if err == nil {
		err = checkOnePrimary(ctx, cfg.ConnConfig)
	}
	if err != nil {
		pool.Close()
		stopPG()
		return nil, nil, err
	}
	if _, err := schema.Migrate(ctx, pool, logger); err != nil {
		pool.Close()
		stopPG()
		return nil, nil, err
	}
	return pool, func() { pool.Close(); stopPG() }, nil
}

func migrate(ctx context.Context, e env, logger *slog.Logger) error {
	_, stop, err := openDatabase(ctx, e, logger)
	if err != nil {
		return err
	}
	stop()
	logger.Info("schema is up to date")
	return nil
}
