package yamljson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"go.yaml.in/yaml/v3"
)

// Write writes the YAML node n as JSON. Scalars keep their YAML
// type (an unquoted 200 is a number, a quoted "200" a string); mapping keys
// are always strings, in the YAML's order. Anchors are followed; merge keys
// and non-finite numbers have no JSON form and are refused.
func Write(b *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return fmt.Errorf("line %d: want one document", n.Line)
		}
		return Write(b, n.Content[0])
	case yaml.AliasNode:
		return Write(b, n.Alias)
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
			if err := Write(b, v); err != nil {
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
			if err := Write(b, c); err != nil {
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
