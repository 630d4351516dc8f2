package api

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sync"

	"go.yaml.in/yaml/v3"
)

// openAPIYAML is the API's OpenAPI 3.1 document, kept beside the code it
// describes. The tests check it against the route table both ways and
// validate every request and response of the API tests against it.
//
//go:embed openapi.yaml
var openAPIYAML []byte

// openAPIJSON converts the document to JSON once, keeping the YAML's key
// order, so GET /openapi.json is a byte copy.
var openAPIJSON = sync.OnceValues(func() ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(openAPIYAML, &doc); err != nil {
		return nil, fmt.Errorf("api: openapi.yaml: %w", err)
	}
	var b bytes.Buffer
	if err := writeYAMLAsJSON(&b, &doc); err != nil {
		return nil, fmt.Errorf("api: openapi.yaml: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		return nil, fmt.Errorf("api: openapi.yaml as JSON: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
})

// OpenAPI returns the API's OpenAPI 3.1 document as JSON: what GET
// /openapi.json serves. The returned slice must not be modified.
func OpenAPI() ([]byte, error) { return openAPIJSON() }

// serveOpenAPI is GET /openapi.json. New has converted the document
// already, so this cannot fail.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	doc, _ := openAPIJSON()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(doc)
}

// writeYAMLAsJSON writes the YAML node n as JSON. Scalars keep their YAML
// type (an unquoted 200 is a number, a quoted "200" a string); mapping keys
// are always strings, in the YAML's order. Anchors are followed; merge keys
// and non-finite numbers have no JSON form and are refused.
func writeYAMLAsJSON(b *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return fmt.Errorf("line %d: want one document", n.Line)
		}
		return writeYAMLAsJSON(b, n.Content[0])
	case yaml.AliasNode:
		return writeYAMLAsJSON(b, n.Alias)
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				return fmt.Errorf("line %d: mapping keys must be plain scalars", k.Line)
			}
			if i > 0 {
				b.WriteByte(',')
			}
			key, _ := json.Marshal(k.Value)
			b.Write(key)
			b.WriteByte(':')
			if err := writeYAMLAsJSON(b, v); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		return nil
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeYAMLAsJSON(b, c); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	case yaml.ScalarNode:
		var v any
		switch n.ShortTag() {
		case "!!null":
			v = nil
		case "!!bool":
			var x bool
			if err := n.Decode(&x); err != nil {
				return err
			}
			v = x
		case "!!int":
			var x int64
			if err := n.Decode(&x); err != nil {
				return err
			}
			v = x
		case "!!float":
			var x float64
			if err := n.Decode(&x); err != nil {
				return err
			}
			if math.IsInf(x, 0) || math.IsNaN(x) {
				return fmt.Errorf("line %d: %s has no JSON form", n.Line, n.Value)
			}
			v = x
		default: // strings, and timestamps kept as written
			v = n.Value
		}
		out, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b.Write(out)
		return nil
	default:
		return fmt.Errorf("line %d: unexpected YAML node kind %d", n.Line, n.Kind)
	}
}
