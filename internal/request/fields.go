package request

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/actledger/actledger/internal/display"
)

// noNUL is the problem named when a field holds U+0000.
const noNUL = `must not contain \u0000 (U+0000 cannot be stored)`

// JSONBProblem says why Postgres would refuse the JSON text body as jsonb,
// or "" when it would store it: U+0000 (\u0000), a lone UTF-16 surrogate
// escape (\ud800 with no low half, or a low half alone), or bytes that are
// not UTF-8. Such input is refused as a 400 naming its field instead of
// failing the insert with a 500 on every retry (a supplier would redeliver
// a well-signed webhook for ever). Malformed JSON passes: the decoder
// reports it.
func JSONBProblem(body []byte) string {
	if !utf8.Valid(body) {
		return "must be UTF-8 (Postgres cannot store other bytes)"
	}
	inString := false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\' && i+1 < len(body) && body[i+1] == 'u':
			r, ok := hex4(body[i+2:])
			if !ok {
				return ""
			}
			i += 5 // the last hex digit
			switch {
			case r == 0:
				return noNUL
			case r >= 0xDC00 && r <= 0xDFFF:
				return fmt.Sprintf(`must not contain the lone surrogate \u%04x (it cannot be stored)`, r)
			case r >= 0xD800 && r <= 0xDBFF:
				if len(body) > i+2 && body[i+1] == '\\' && body[i+2] == 'u' {
					if low, ok := hex4(body[i+3:]); ok && low >= 0xDC00 && low <= 0xDFFF {
						i += 6
						continue
					}
				}
				return fmt.Sprintf(`must not contain the lone surrogate \u%04x (it cannot be stored)`, r)
			}
		case c == '\\':
			i++ // an escaped character: \" does not end the string
		}
	}
	return ""
}

// hex4 reads four hex digits.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(n), err == nil
}

// maxExactInteger is 2^53, the largest integer magnitude below which
// every integer has its own IEEE 754 double. RFC 8785 canonicalises every
// number as a double, so 2^53+1 would become 2^53: two different requests
// with one fingerprint, and a provider sent a value nobody approved.
const maxExactInteger = "9007199254740992"

// checkExactNumbers refuses any integer in the JSON value raw (at any
// depth) whose magnitude is beyond 2^53 and that the canonical form would
// not keep, naming its path from field ("params.items[2].qty"). A literal
// with a fraction or an exponent that is not an integer (1.5) keeps RFC
// 8785 semantics (the nearest double), as the client chose a float
// notation; one that is an integer is refused when canonicalisation would
// change its value (9007199254740993.0 becomes 9007199254740992), and
// kept when it would not (1e21, 1e300 stay 1e+21, 1e+300). Values beyond
// the double range are refused by canonicalisation.
func checkExactNumbers(field string, raw json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	// path holds one frame per open container: an object's current key, or
	// an array's next index.
	type frame struct {
		array bool
		key   string
		index int
		// wantKey is set in an object when the next token is a key.
		wantKey bool
	}
	var path []frame
	where := func() string {
		var b strings.Builder
		b.WriteString(field)
		for _, f := range path {
			if f.array {
				fmt.Fprintf(&b, "[%d]", f.index)
			} else if plainKey(f.key) {
				b.WriteString("." + f.key)
			} else {
				fmt.Fprintf(&b, "[%q]", f.key)
			}
		}
		return b.String()
	}
	// afterValue moves the innermost frame past the value just read.
	afterValue := func() {
		if n := len(path); n > 0 {
			if path[n-1].array {
				path[n-1].index++
			} else {
				path[n-1].wantKey = true
			}
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			// Malformed JSON is the decoder's or the canonicaliser's to
			// refuse; this check only looks at numbers.
			return nil
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				path = append(path, frame{wantKey: true})
			case '[':
				path = append(path, frame{array: true})
			case '}', ']':
				path = path[:len(path)-1]
				afterValue()
			}
		case string:
			if n := len(path); n > 0 && !path[n-1].array && path[n-1].wantKey {
				path[n-1].key, path[n-1].wantKey = v, false
				continue
			}
			afterValue()
		case json.Number:
			if beyondExact(string(v)) {
				return FieldError(where(), fmt.Sprintf("the integer %s is beyond ±2^53 and cannot be kept exactly "+
					"(JSON numbers are canonicalised as IEEE 754 doubles); send it as a string", v))
			}
			afterValue()
		default:
			afterValue()
		}
	}
}

// beyondExact reports whether the JSON number literal n is an integer
// beyond 2^53 in magnitude that the canonical form would not keep: any
// such plain integer literal, and one written with a fraction or an
// exponent whose canonical double prints as another value.
func beyondExact(n string) bool {
	if !strings.ContainsAny(n, ".eE") {
		digits := strings.TrimLeft(strings.TrimPrefix(n, "-"), "0")
		if len(digits) != len(maxExactInteger) {
			return len(digits) > len(maxExactInteger)
		}
		return digits > maxExactInteger
	}
	lit, ok := parseDecimal(n)
	if !ok || !lit.beyondExactInteger() {
		return false
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil {
		return false // beyond the double range: canonicalisation refuses it
	}
	canonical, ok := parseDecimal(strconv.FormatFloat(f, 'e', -1, 64))
	return !ok || canonical != lit
}

// decimal is a JSON number's exact value: digits × 10^exp, digits without
// leading or trailing zeros ("" for zero, whose sign and exponent are
// dropped). Comparing two decimals compares the values exactly, without
// arithmetic whose cost grows with the exponent.
type decimal struct {
	negative bool
	digits   string
	exp      int
}

// parseDecimal reads a JSON number literal; ok is false for an exponent
// beyond int, whose value the double range does not hold anyway.
func parseDecimal(n string) (d decimal, ok bool) {
	d.negative = strings.HasPrefix(n, "-")
	n = strings.TrimPrefix(n, "-")
	mantissa, exponent, hasExp := strings.Cut(strings.ToLower(n), "e")
	if hasExp {
		e, err := strconv.Atoi(exponent)
		if err != nil {
			return decimal{}, false
		}
		d.exp = e
	}
	whole, frac, _ := strings.Cut(mantissa, ".")
	d.exp -= len(frac)
	d.digits = strings.TrimLeft(whole+frac, "0")
	trimmed := strings.TrimRight(d.digits, "0")
	d.exp += len(d.digits) - len(trimmed)
	d.digits = trimmed
	if d.digits == "" {
		return decimal{}, true
	}
	return d, true
}

// beyondExactInteger reports whether d is an integer whose magnitude
// exceeds 2^53.
func (d decimal) beyondExactInteger() bool {
	if d.digits == "" || d.exp < 0 {
		return false
	}
	width := len(d.digits) + d.exp
	if width != len(maxExactInteger) {
		return width > len(maxExactInteger)
	}
	return d.digits+strings.Repeat("0", d.exp) > maxExactInteger
}

// plainKey reports whether key can follow a dot in a path.
func plainKey(key string) bool {
	if key == "" {
		return false
	}
	for _, r := range key {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// Length limits of the free-text fields, in characters (Unicode code
// points), as the OpenAPI document's maxLength counts them: a client that
// checks a field against the document is never refused for it. Postgres
// stores any length, but a field is shown to people and copied into
// events, logs and review messages: a bound keeps one request from
// bloating all of them.
const (
	MaxNameLength      = 256  // policy_version, reason, webhook type
	MaxReferenceLength = 1024 // provider_reference, webhook reference
	MaxNoteLength      = 4096 // an operator's note
	// MaxKeyLength bounds an operation's key: a caller's key and a
	// business key alike, since either becomes the key.
	MaxKeyLength = 256
)

// CheckText refuses U+0000 (Postgres cannot store it in text or jsonb, so
// it would fail the insert with a 500) and text longer than max
// characters, naming the field.
func CheckText(field, value string, max int) error {
	if strings.ContainsRune(value, 0) {
		return FieldError(field, noNUL)
	}
	if utf8.RuneCountInString(value) > max {
		return FieldError(field, fmt.Sprintf("must be at most %d characters", max))
	}
	return nil
}

// CheckParams checks a params object as every route that accepts one
// does: a JSON object Postgres can store, every integer exact.
func CheckParams(field string, params json.RawMessage) error {
	if len(params) == 0 || params[0] != '{' {
		return FieldError(field, "must be a JSON object")
	}
	if problem := JSONBProblem(params); problem != "" {
		return FieldError(field, problem)
	}
	return checkExactNumbers(field, params)
}

// CheckKey is the rule for a business key (key, compensation.key): 1 to
// MaxKeyLength characters of visible text. A key names an operation to
// people (in the console, the CLI, review messages) and to other agents
// (an MCP tool's text), who tell keys apart by eye: a control character
// would forge or hide lines where it is printed, and an invisible one
// (display.Hidden: a right-to-left override, a zero-width space, a Hangul
// filler) would make two keys look alike. Free text (a reason, a note)
// may hold them; it is shown escaped.
func CheckKey(field, key string) error {
	if key == "" || utf8.RuneCountInString(key) > MaxKeyLength {
		return FieldError(field, fmt.Sprintf("must be 1 to %d characters", MaxKeyLength))
	}
	if strings.ContainsRune(key, 0) {
		return FieldError(field, noNUL)
	}
	for i, r := range []rune(key) {
		if display.Hidden(r) {
			return FieldError(field, fmt.Sprintf("must be visible text: %U at character %d is a control, format or invisible character", r, i+1))
		}
	}
	return nil
}
