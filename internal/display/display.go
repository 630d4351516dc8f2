// Package display shows text that came from elsewhere (an agent's key, an
// approver's reason, params, a supplier's answer) to a person, so that
// every character of it is seen: a character that renders as nothing, or
// that changes how the text around it is shown, is written as its JSON
// escape (\u202e) where it stands. The console, the CLI and the MCP tool
// text share this one rule, so what an approver sees in any of them is
// what is approved.
//
// It must never drop a character, and never let one through that a
// terminal or a browser would hide (a zero-width space, a Hangul filler),
// reorder text with (a right-to-left override) or act on (an ESC that
// starts a terminal escape sequence, a carriage return that overwrites the
// line).
package display

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
)

// Hidden reports whether r is a character a person would not see as
// itself:
//   - control characters (C0, DEL, C1): a terminal acts on them (ESC
//     starts an escape sequence, CR returns to the start of the line, LF
//     starts a new one, so text can forge lines of its own);
//   - format characters (Cf: bidirectional overrides, zero-width spaces
//     and joiners, the soft hyphen, tag characters), line and paragraph
//     separators, surrogates, private-use and unassigned code points: none
//     has a glyph of its own that all fonts share;
//   - the other default-ignorable code points (Unicode's
//     Other_Default_Ignorable_Code_Point: the Hangul fillers U+115F,
//     U+1160, U+3164 and U+FFA0, the combining grapheme joiner U+034F, …)
//     and the variation selectors (U+FE00–FE0F, U+E0100–E01EF, the
//     Mongolian ones), which render as nothing;
//   - spaces other than U+0020 (a no-break space, an ideographic space)
//     and the blank Braille pattern U+2800: they look like a space or like
//     nothing, so "A-1" and "A-1\u00a0" would look alike.
func Hidden(r rune) bool {
	switch {
	case r == ' ':
		return false
	case r < 0x20 || r == 0x7f:
		return true
	case r < 0x7f:
		return false
	}
	return !unicode.IsGraphic(r) ||
		unicode.In(r, unicode.Zs, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector) ||
		r == '\u2800'
}

// Line returns s with every Hidden character written as its JSON escape,
// line breaks and tabs included: for text shown on one line (a terminal's
// output, a key, a table cell), where a raw line break could forge a line
// of its own.
func Line(s string) string { return escape(s, "") }

// Block returns s as Line does, but keeps line breaks (\n) and tabs as
// they are: for text shown as a block whose lines are the text's own (a
// <pre> of indented JSON, whose newlines are the indentation's).
func Block(s string) string { return escape(s, "\n\t") }

// Quote returns s as a JSON string literal (in double quotes, with JSON's
// escapes) in which every Hidden character is escaped too: text quoted as
// data, clearly delimited, for a reader (a model) that must not take it for
// instructions. It is valid JSON and decodes to s.
func Quote(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "A & B" stays readable; this is not HTML
	if err := enc.Encode(s); err != nil {
		// A string always encodes; keep the function total all the same.
		return `"` + Line(s) + `"`
	}
	// Inside a JSON string an escape means the character it names, and
	// JSON has already escaped the quote, the backslash and C0 controls.
	return Line(strings.TrimSuffix(b.String(), "\n"))
}

// escape writes each Hidden character of s, other than those in keep, as
// its JSON escape; a character beyond U+FFFF as its UTF-16 surrogate pair
// (\udb40\udc41), as JSON writes it.
func escape(s, keep string) string {
	hidden := func(r rune) bool { return Hidden(r) && !strings.ContainsRune(keep, r) }
	if strings.IndexFunc(s, hidden) < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for _, r := range s {
		switch {
		case !hidden(r):
			b.WriteRune(r)
		case r > 0xFFFF:
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, hi, lo)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// TimeLayout is how a time is shown to a person: UTC, to the millisecond,
// so that the events of one operation a few milliseconds apart read apart
// and in order ("2026-12-01 09:53:46.120Z").
const TimeLayout = "2006-01-02 15:04:05.000Z07:00"

// Time shows t in TimeLayout, in UTC; the zero time is "—".
func Time(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format(TimeLayout)
}
