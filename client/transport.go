package client

import (
	"net/http"
	"net/http/httptest"
)

// HandlerTransport is an http.RoundTripper that serves each request with
// h in the same process, no socket: the MCP endpoint calls the API this
// way with its caller's token, so every rule an MCP tool meets is the
// API's own. The answer is buffered whole (fine for the API's JSON; a
// long poll simply answers when it is done).
func HandlerTransport(h http.Handler) http.RoundTripper {
	return handlerTransport{h: h}
}

type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	// A server-side request: the handler reads RequestURI-less URLs fine,
	// but wants a body and a remote address.
	in := req.Clone(req.Context())
	if in.Body == nil {
		in.Body = http.NoBody
	}
	in.RemoteAddr = "in-process"
	in.RequestURI = in.URL.RequestURI()
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, in)
	res := rec.Result()
	res.Request = req
	return res, nil
}
