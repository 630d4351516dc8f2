package request

import (
	"strings"
	"testing"
)

func TestJSONBProblemNamesWhatPostgresWouldRefuse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, want string
	}{
		{"plain", `{"a":"b"}`, ""},
		{"escaped pair", `{"a":"\ud83d\ude00"}`, ""},
		{"escaped backslash then u0000", `{"a":"\\u0000"}`, ""},
		{"escaped quote does not end the string", `{"a":"\"\u0000"}`, "U+0000"},
		{"NUL", `{"a":"x\u0000"}`, "U+0000"},
		{"lone high surrogate", `{"a":"\ud800"}`, `\ud800`},
		{"lone high surrogate before another escape", `{"a":"\ud800\n"}`, `\ud800`},
		{"two high surrogates", `{"a":"\ud800\ud800"}`, `\ud800`},
		{"lone low surrogate", `{"a":"\udc00x"}`, `\udc00`},
		{"lone surrogate in a key", `{"\uDBFF":1}`, `\udbff`},
		{"invalid UTF-8", "{\"a\":\"\xff\"}", "UTF-8"},
		{"an escape outside strings is the decoder's", `\u0000`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := JSONBProblem([]byte(tt.body))
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("JSONBProblem(%s) = %q, want one naming %q", tt.body, got, tt.want)
			}
		})
	}
}
