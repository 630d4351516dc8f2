package provider

import (
	"encoding/json"
	"regexp"
	"slices"
)

// Evidence says which fields of a supplier's answers are kept as evidence
// (yaml "evidence"): what recovery needs, not whole answers, which may hold
// a customer's address or a card's last digits.
type Evidence struct {
	// Keep lists the top-level fields of an answer that are kept in
	// events and review facts (yaml "keep"), or is ["all"] for the whole
	// answer (its first 2 KiB). Default: the reference field, the
	// reference param, "status" and "id". An answer that is not a JSON
	// object keeps nothing.
	Keep []string
}

// KeepAll is the Keep entry that keeps whole answers.
const KeepAll = "all"

// keptFields is the provider's Keep, defaults filled: nil means all.
func (c *Config) keptFields() []string {
	keep := c.Evidence.Keep
	if slices.Contains(keep, KeepAll) {
		return nil
	}
	if len(keep) == 0 {
		keep = []string{c.ReferenceField, c.ReferenceParam, "status", "id"}
		if m := topField.FindStringSubmatch(c.Create.Reference); m != nil {
			keep = append(keep, m[1])
		}
	}
	return keep
}

// topField reads the top-level field of a reference expression of the
// form response.NAME….
var topField = regexp.MustCompile(`^response\.([A-Za-z_][A-Za-z0-9_]*)`)

// evidenceOf is what an answer's body leaves as evidence: the kept
// fields of a JSON object, or with keep all the body itself; always at
// most 2 KiB of valid UTF-8 without NULs.
func (c *Config) evidenceOf(raw []byte) string {
	keep := c.keptFields()
	if keep == nil {
		return evidence(raw)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return ""
	}
	kept := make(map[string]json.RawMessage, len(keep))
	for _, name := range keep {
		if v, ok := obj[name]; ok {
			kept[name] = v
		}
	}
	if len(kept) == 0 {
		return ""
	}
	out, err := json.Marshal(kept)
	if err != nil {
		return ""
	}
	return evidence(out)
}
