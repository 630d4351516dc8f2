// Package duration reads a duration as the providers file writes one, in every section: a Go
// duration string ("100ms", "2s", "24h"). A bare number is refused rather than guessed at: "2"
// could mean seconds or nanoseconds, and a retention window or an approval's lifetime is no
// place for a guess.
package duration

import (
	"fmt"
	"strings"
	"time"
)

// Parse reads s, blanks around it ignored, with an error that says what is accepted.
func Parse(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (want e.g. \"100ms\", \"2s\", \"24h\"): %w", s, err)
	}
	return d, nil
}
