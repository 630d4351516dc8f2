package github

import (
	"net/http"
	"testing"
)

// TestSignatureMatchesGitHubsTestVector checks the X-Hub-Signature-256 the fake sends against
// the values GitHub publishes for checking an implementation
// (https://docs.github.com/webhooks/using-webhooks/validating-webhook-deliveries).
func TestSignatureMatchesGitHubsTestVector(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	sign(h, "It's a Secret to Everybody", []byte("Hello, World!"))
	got := h.Get("X-Hub-Signature-256")
	want := "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	if got != want {
		t.Errorf("X-Hub-Signature-256 = %s, want %s", got, want)
	}
}
