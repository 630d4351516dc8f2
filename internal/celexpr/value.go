package celexpr

import (
	"bytes"
	"encoding/json"
	"fmt"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// ParseJSON parses raw as JSON into the values CEL reads (see FromJSON); ok is false when raw
// is not one JSON value.
func ParseJSON(raw []byte) (v any, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err == nil {
		return nil, false
	}
	return FromJSON(v), true
}

// FromJSON turns the json.Numbers of v (decoded with UseNumber) into int64 where they are
// integers and float64 otherwise, in place, so "params.qty <= 10" compares integers as
// written.
func FromJSON(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = FromJSON(e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = FromJSON(e)
		}
		return v
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n
		}
		f, _ := v.Float64()
		return f
	}
	return v
}

// Native converts a CEL value into plain Go values (map[string]any, []any, string, int64,
// uint64, float64, bool, nil), keeping integers integers (a JSON round trip through float64
// would round large ones).
func Native(v ref.Val) (any, error) {
	switch v := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(v), nil
	case types.Int:
		return int64(v), nil
	case types.Uint:
		return uint64(v), nil
	case types.Double:
		return float64(v), nil
	case types.String:
		return string(v), nil
	case traits.Mapper:
		out := map[string]any{}
		it := v.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			key, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("map key %v is not a string", k)
			}
			val, err := Native(v.Get(k))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
			out[string(key)] = val
		}
		return out, nil
	case traits.Lister:
		n, _ := v.Size().(types.Int)
		out := make([]any, 0, int(n))
		for i := types.Int(0); i < n; i++ {
			val, err := Native(v.Get(i))
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out = append(out, val)
		}
		return out, nil
	case *types.Err:
		return nil, v
	}
	return nil, fmt.Errorf("a %s cannot be sent as JSON", v.Type().TypeName())
}
