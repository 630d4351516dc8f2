// Package yamljson writes a YAML document as JSON, keeping its key order
// and each scalar's YAML type: api serves its OpenAPI document, written in
// YAML, as GET /openapi.json, a byte copy of one conversion.
package yamljson
