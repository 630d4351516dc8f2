package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actledger/actledger/mcp"
)

// mcpUsage is `actledger mcp --help`.
const mcpUsage = `actledger mcp: serve actledger's tools to an agent over MCP on stdin/stdout.

It talks to the running service's API (ACTLEDGER_URL, default
http://$LISTEN_ADDR) with ACTLEDGER_TOKEN, a token of role agent; it opens no
database connection. Tools: one per configured action (supplier.create_order
→ supplier_create_order), get_operation {id, wait_seconds?} and
list_operations {status?, limit?}. Logs go to stderr.
`

// serveMCP is `actledger mcp`: an MCP server on stdin/stdout whose tools
// call the API through package client, until stdin closes or ctx ends.
func serveMCP(ctx context.Context, getenv func(string) string, args []string, stdin io.Reader, stdout io.Writer, logger *slog.Logger) error {
	if isHelp(args) {
		fmt.Fprint(stdout, mcpUsage)
		return nil
	}
	if len(args) > 0 {
		return fmt.Errorf("mcp takes no arguments: %w", errUsage)
	}
	c, err := apiClient(getenv, "agent")
	if err != nil {
		return err
	}
	s, err := mcp.NewServer(ctx, c, mcp.Config{Logger: logger})
	if err != nil {
		return fmt.Errorf("%w (is actledger serve running at %s?)", err, c.BaseURL())
	}
	logger.Info("mcp: serving on stdio", "api", c.BaseURL())
	err = s.Run(ctx, &sdk.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}})
	if err == nil || errors.Is(err, io.EOF) || ctx.Err() != nil {
		return nil // the agent closed the session, or we were stopped
	}
	return err
}

// nopWriteCloser leaves stdout open when the session closes.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
