package api

import (
	"cmp"
	"net/http"
	"time"
)

// HTTPLimits bounds what one client connection may hold of the server. It
// is the one place the defaults live; zero values mean them.
//
// Without a bound on the body, an unauthenticated client trickling a
// webhook body one byte a second held a connection (and a goroutine) as
// long as it liked. With these, a request must arrive whole within
// ReadTimeout of its first byte, its answer must be written within
// WriteTimeout, and an idle keep-alive connection closes after IdleTimeout.
type HTTPLimits struct {
	// ReadHeaderTimeout bounds reading a request's headers. Default 5s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, headers and body (at
	// most MaxBody). A body not in by then is cut off: the answer is 408
	// and the connection closes. Default 15s.
	ReadTimeout time.Duration
	// WriteTimeout bounds the time from the end of the request headers to
	// the end of the answer. Requests themselves give up after
	// Config.RequestTimeout (default 10s), so this is the backstop. A route
	// that streams or long-polls extends its own deadline with
	// ExtendWriteDeadline. Default 30s.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long. Default
	// 120s.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers. Default 64 KiB.
	MaxHeaderBytes int
}

// The HTTPLimits defaults.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 15 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
)

// WithDefaults returns l with every zero field set to its default.
func (l HTTPLimits) WithDefaults() HTTPLimits {
	l.ReadHeaderTimeout = cmp.Or(l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	l.ReadTimeout = cmp.Or(l.ReadTimeout, DefaultReadTimeout)
	l.WriteTimeout = cmp.Or(l.WriteTimeout, DefaultWriteTimeout)
	l.IdleTimeout = cmp.Or(l.IdleTimeout, DefaultIdleTimeout)
	l.MaxHeaderBytes = cmp.Or(l.MaxHeaderBytes, DefaultMaxHeaderBytes)
	return l
}

// NewHTTPServer returns the http.Server that serves h under limits (zero
// fields: the defaults). `actledger serve` uses it; so should anything
// else that puts the API on a socket.
func NewHTTPServer(h http.Handler, limits HTTPLimits) *http.Server {
	l := limits.WithDefaults()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}

// ExtendWriteDeadline lets a route that streams or long-polls (a replay's
// NDJSON, a future MCP stream) answer for longer than the server's
// WriteTimeout: its connection's write deadline becomes now + d. Every
// other route keeps the server's bound. It fails when the ResponseWriter
// cannot set deadlines (e.g. a test recorder).
func ExtendWriteDeadline(w http.ResponseWriter, d time.Duration) error {
	return http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
}
