package provider

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/actledger/actledger/internal/duration"
)

// Duration is a time.Duration written in configuration as a Go duration string ("100ms", "2s",
// "24h"). A bare number is rejected rather than guessed at: "2" could mean seconds or
// nanoseconds, and a retention window is no place for a guess.
type Duration struct {
	time.Duration
}

// ParseDuration parses a Go duration string into a Duration with an error that says what is
// accepted.
func ParseDuration(s string) (Duration, error) {
	d, err := duration.Parse(s)
	return Duration{d}, err
}

// UnmarshalText makes Duration decodable from JSON strings and any text-based format.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := ParseDuration(string(text))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalText writes the duration back in the form it is read, e.g. "2s".
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(d.String()), nil
}

// UnmarshalYAML decodes a YAML scalar duration, naming the line on error.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: duration must be a string like \"2s\"", n.Line)
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = v
	return nil
}
