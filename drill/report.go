package drill

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/actledger/actledger/internal/display"
)

// Report is what a drill found: the contract's JSON shape (docs/drills.md), and the Markdown a
// reviewer reads (WriteMarkdown).
type Report struct {
	Action   string `json:"action"`
	Provider string `json:"provider"`
	// Passed is true only when every scenario that ran passed.
	Passed    bool       `json:"passed"`
	Scenarios []Scenario `json:"scenarios"`
	// Effects is every effect the drill made at the supplier, for cleaning the test account.
	Effects []Effect `json:"effects"`

	// The rest is for the Markdown.
	environment, account, counted string
	seconds                       float64
	stopped                       string
}

// Scenario is one scenario's verdict.
type Scenario struct {
	Name string `json:"name"`
	// Passed is nil when the verdict could not be established (nothing could count the
	// supplier's records, or the scenario did not finish).
	Passed *bool `json:"passed"`
	// Effects is how many effects the supplier holds for the scenario's intention; nil when
	// they could not be counted.
	Effects *int `json:"effects"`
	// State and Summary are what the user sees of the scenario's operation.
	State   string `json:"state"`
	Summary string `json:"summary"`
	// Review lists the reasons of the review items the scenario opened.
	Review []string `json:"review"`
	// AccessOK: a token of another tenant and one of another scope both got 404 for every
	// operation of the scenario; false when one saw it, or when no operation was asked about
	// (a scenario that did not run).
	AccessOK bool    `json:"access_ok"`
	Seconds  float64 `json:"seconds"`
	// Why says in plain words why the scenario did not pass; empty when it did.
	Why string `json:"why"`

	fault  string
	params string
	// in are the params the scenario's operations are requested with.
	in    json.RawMessage
	notes []string
	// unsettled says which operation did not settle within the patience.
	unsettled string
	// accessChecked: AccessOK was asked of an operation (false: no operation to ask about).
	accessChecked bool
}

// Effect is one effect at the supplier. ProviderReference is nil when the supplier's records
// could not be read: a person checks Reference by hand.
type Effect struct {
	Scenario          string  `json:"scenario"`
	Reference         string  `json:"reference"`
	ProviderReference *string `json:"provider_reference"`
}

// Failed counts the scenarios that failed, and those whose verdict is not established.
func (r *Report) Failed() (failed, unknown int) {
	for _, s := range r.Scenarios {
		switch {
		case s.Passed == nil:
			unknown++
		case !*s.Passed:
			failed++
		}
	}
	return failed, unknown
}

// WriteJSON writes the report's JSON, indented.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// verdict is a scenario's verdict in words.
func (s Scenario) verdict() string {
	switch {
	case s.Passed == nil:
		return "not established"
	case *s.Passed:
		return "passed"
	}
	return "FAILED"
}

// WriteMarkdown writes the report for a pull request or a security review.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	failed, unknown := r.Failed()
	verdict := "**passed**: every scenario that ran made at most one effect at the supplier."
	switch {
	case failed > 0:
		verdict = fmt.Sprintf("**FAILED**: %d of %d scenarios failed.", failed, len(r.Scenarios))
	case unknown > 0:
		verdict = fmt.Sprintf("**not established**: %d of %d scenarios could not be judged from the supplier's records.", unknown, len(r.Scenarios))
	}
	fmt.Fprintf(&b, "# Drill: `%s` on provider `%s`\n\n", r.Action, r.Provider)
	fmt.Fprintf(&b, "%s\n\n", verdict)
	fmt.Fprintf(&b, "Supplier account `%s`, environment `%s`. Effects counted at the supplier by its %s. %d scenarios in %.1f s.\n",
		r.account, r.environment, r.counted, len(r.Scenarios), r.seconds)
	if r.stopped != "" {
		fmt.Fprintf(&b, "\nThe drill was stopped before it finished: %s.\n", r.stopped)
	}
	b.WriteString("\n| scenario | verdict | effects | state | review | access | seconds |\n|---|---|---|---|---|---|---|\n")
	for _, s := range r.Scenarios {
		effects := "?"
		if s.Effects != nil {
			effects = fmt.Sprint(*s.Effects)
		}
		access := "404 ✓"
		switch {
		case !s.accessChecked:
			access = "not checked"
		case !s.AccessOK:
			access = "**visible**"
		}
		state := cell(code(s.State))
		if s.State == "" {
			state = "—"
		}
		review := cell(display.Line(strings.Join(s.Review, ", ")))
		if review == "" {
			review = "—"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %.1f |\n", s.Name, s.verdict(), effects, state, review, access, s.Seconds)
	}
	for _, s := range r.Scenarios {
		fmt.Fprintf(&b, "\n## %s: %s\n\n", s.Name, s.verdict())
		if s.fault != "" {
			fmt.Fprintf(&b, "- Fault: %s\n", s.fault)
		}
		if s.params != "" {
			fmt.Fprintf(&b, "- Params: %s\n", code(s.params))
		}
		for _, n := range s.notes {
			fmt.Fprintf(&b, "- %s\n", display.Line(n))
		}
		if s.Summary != "" {
			fmt.Fprintf(&b, "- What the user sees: %s, %s\n", code(s.State), display.Quote(s.Summary))
		}
		if s.Why != "" {
			fmt.Fprintf(&b, "- **Why**: %s\n", display.Line(s.Why))
		}
	}
	b.WriteString("\n## Effects made at the supplier\n\nEvery effect the drill made, to clean the test account.\n\n")
	if len(r.Effects) == 0 {
		b.WriteString("None.\n")
	} else {
		b.WriteString("| scenario | reference (external key) | supplier's reference |\n|---|---|---|\n")
		for _, e := range r.Effects {
			ref := "not read: check by hand"
			if e.ProviderReference != nil {
				ref = cell(code(*e.ProviderReference))
			}
			fmt.Fprintf(&b, "| %s | %s | %s |\n", e.Scenario, cell(code(e.Reference)), ref)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// code is s as Markdown inline code, every character of it seen (internal/display): a supplier's
// reference or params may hold anything, a backtick included, which a longer fence keeps inside.
func code(s string) string {
	v := display.Line(s)
	if strings.Contains(v, "`") {
		return "`` " + v + " ``"
	}
	return "`" + v + "`"
}

// cell is s made safe for a Markdown table cell: a pipe would end the cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
