package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"sort"
	"strings"
	"time"

	"github.com/actledger/actledger/internal/display"
)

// pageNames are the templates/*.html pages; each defines "content" and is
// parsed with templates/layout.html.
var pageNames = []string{"signin", "error", "overview", "approvals", "review", "results", "operations", "operation", "dispatch", "signedin"}

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
	"pretty": pretty,
	// visible is every value of text shown inline (a key, a reason, a
	// summary, a name): see package display.
	"visible": display.Line,
	"list":    func(s ...string) []string { return s },
	"facts":   factList,
}

// timestamp is every time a page shows: one format, to the millisecond
// (display.Time).
func timestamp(t time.Time) string { return display.Time(t) }

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
		return display.Line(string(raw))
	}
	// Outside a JSON string only the indentation's newlines and spaces
	// occur, so an escape can only land inside a string, where it means
	// the same character.
	return display.Block(out.String())
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
		out = append(out, fact{Name: display.Line(k), Value: display.Line(string(b))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
