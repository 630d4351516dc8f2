package testpipeline

import (
	"bytes"
	"sync"
)

// LogBuffer is a log sink safe for the pipeline's goroutines
// (Options.Logger over slog.NewTextHandler(buf, …)), for a test that
// reads what the process logged.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything logged so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
