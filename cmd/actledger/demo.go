package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
)

// demo is `actledger demo` (being written).
func demo(ctx context.Context, e env, args []string, stdout io.Writer, logger *slog.Logger) error {
	return errors.New("demo: not yet available")
}
