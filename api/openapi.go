package api

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/actledger/actledger/internal/yamljson"
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
	if err := yamljson.Write(&b, &doc); err != nil {
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
