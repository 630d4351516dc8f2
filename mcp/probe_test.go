package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/actledger/actledger/internal/testpipeline"
)

func TestProbe(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{ActionContract: `params_schema: {type: object, required: [item], properties: {item: {$ref: "#/$defs/item"}}, $defs: {item: {type: object, required: [sku], properties: {sku: {type: string}}}}}`})
	cs := inMemorySession(t, p, p.Agent)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name != "supplier_create_order" {
			continue
		}
		raw, _ := json.Marshal(tool.InputSchema)
		t.Logf("%s", raw)
		doc, _ := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		if err := c.AddResource("tool.json", doc); err != nil {
			t.Fatal(err)
		}
		_, err := c.Compile("tool.json")
		t.Logf("compile: %v", err)
	}
	status, out := p.Do("POST", "/v1/operations", p.Agent, `{"action":"supplier.create_order","key":"k1","params":{"item":{}},"request_approval":true}`)
	t.Logf("%d %v", status, out)
}
