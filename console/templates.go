package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
)

// pageNames are the templates/*.html pages; each defines "content" and is
// parsed with templates/layout.html.
var pageNames = []string{"signin", "error", "approvals", "review", "results", "operation", "dispatch"}

func parsePages() (map[string]*template.Template, error) {
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("console: parse layout: %w", err)
	}
	pages := make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		t, err := template.Must(layout.Clone()).ParseFS(templateFS, "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: parse %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

var funcs = template.FuncMap{
	"ts":  timestamp,
	"tsp": func(t *time.Time) string { return timestampPtr(t) },
	"age": age,
	"seconds": func(seconds any) string {
		switch s := seconds.(type) {
		case int64:
			return age(time.Duration(s) * time.Second)
		case float64:
			return age(time.Duration(s * float64(time.Second)))
		}
		return fmt.Sprint(seconds)
	},
	"pretty":  pretty,
	"visible": func(s string) string { return visible(s, "\n\t") },
	"list":    func(s ...string) []string { return s },
	"facts":   factList,
}

// timestamp shows a time as the API does: RFC 3339, UTC, to the second.
func timestamp(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format(time.RFC3339)
}

func timestampPtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return timestamp(*t)
}

// age shows a duration to the second, largest units first ("2h 5m 3s").
func age(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Second {
		return "0s"
	}
	var b strings.Builder
	if h := d / time.Hour; h > 0 {
		fmt.Fprintf(&b, "%dh ", h)
		d -= h * time.Hour
	}
	if m := d / time.Minute; m > 0 {
		fmt.Fprintf(&b, "%dm ", m)
		d -= m * time.Minute
	}
	if s := d / time.Second; s > 0 {
		fmt.Fprintf(&b, "%ds", s)
	}
	return strings.TrimSpace(b.String())
}

// pretty indents JSON for a <pre>; the template escapes it.
func pretty(v any) string {
	var raw []byte
	switch x := v.(type) {
	case json.RawMessage:
		raw = x
	case []byte:
		raw = x
	default:
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return fmt.Sprint(v)
		}
	}
	var out bytes.Buffer
	if json.Indent(&out, raw, "", "  ") != nil {
		return visible(string(raw), "")
	}
	// Outside a JSON string only the indentation's newlines and spaces
	// occur, so an escape can only land inside a string, where it means
	// the same character.
	return visible(out.String(), "\n")
}

// visible writes each character a browser would not show as itself as its
// JSON escape (\u202e): format characters (a right-to-left override
// reorders the text after it, a zero-width space hides), line and
// paragraph separators, and control characters other than those in keep.
// An approver approves what the page shows, so it must show every
// character.
func visible(s, keep string) string {
	hidden := func(r rune) bool {
		return (unicode.IsControl(r) && !strings.ContainsRune(keep, r)) ||
			unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
	}
	if strings.IndexFunc(s, hidden) < 0 {
		return s
	}
	var b strings.Builder
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

// fact is one confirmed fact of a review item, its value as compact JSON.
type fact struct{ Name, Value string }

// factList lists facts by name; params are shown apart, in full.
func factList(facts map[string]any) []fact {
	out := make([]fact, 0, len(facts))
	for k, v := range facts {
		b, err := json.Marshal(v)
		if err != nil {
			b = []byte(fmt.Sprint(v))
		}
		out = append(out, fact{Name: k, Value: visible(string(b), "")})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
