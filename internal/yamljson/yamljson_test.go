package yamljson_test

import (
	"bytes"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/actledger/actledger/internal/yamljson"
)

// The YAML to JSON conversion keeps every scalar's type and refuses what
// JSON cannot hold.
func TestYAMLAsJSONKeepsTypesAndOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		yaml, json string
	}{
		{"b: 1\na: '1'\nc: 1.5\nd: true\ne: null\nf: 2026-11-30T10:00:00Z\n", `{"b":1,"a":"1","c":1.5,"d":true,"e":null,"f":"2026-11-30T10:00:00Z"}`},
		{"200: {x: [1, two]}\n", `{"200":{"x":[1,"two"]}}`},
		{"a: &x {k: v}\nb: *x\n", `{"a":{"k":"v"},"b":{"k":"v"}}`},
		{"a: .inf\n", ""},
		{"a: &a {k: v}\nb: {<<: *a}\n", ""},
	}
	for _, tt := range tests {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(tt.yaml), &n); err != nil {
			if tt.json == "" {
				continue
			}
			t.Fatal(err)
		}
		var b bytes.Buffer
		err := yamljson.Write(&b, &n)
		switch {
		case tt.json == "" && err == nil:
			t.Errorf("%q: got %s, want an error", tt.yaml, b.String())
		case tt.json != "" && (err != nil || b.String() != tt.json):
			t.Errorf("%q: got %s (%v), want %s", tt.yaml, b.String(), err, tt.json)
		}
	}
}
