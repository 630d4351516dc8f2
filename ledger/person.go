package ledger

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
)

// Person is someone the organisation's identity provider signed in, as
// its verified ID token names them. A decision a person makes names them
// in its event: the actor is PersonActor, the detail holds the person
// under "person", so the history says who it was even after their email
// changes hands.
type Person struct {
	Issuer  string `json:"issuer"`
	Subject string `json:"subject"`
	Email   string `json:"email,omitempty"`
	Name    string `json:"name,omitempty"`
}

// Actor is the person's name in events: "person:<email or subject>".
func (p *Person) Actor() string { return "person:" + cmp.Or(p.Email, p.Subject) }

type personKey struct{}

// WithPerson is ctx for a request a person makes: each event it records
// with the person's actor holds the person in its detail. The ledger's
// functions take the actor as a string, as for tokens and workers; the
// person rides along with the request, as its deadline does.
func WithPerson(ctx context.Context, p *Person) context.Context {
	return context.WithValue(ctx, personKey{}, p)
}

// withPersonDetail is c's detail with the person of ctx added, when c is
// that person's decision; any other change is left as it is.
func withPersonDetail(ctx context.Context, c Change) (Change, error) {
	p, _ := ctx.Value(personKey{}).(*Person)
	if p == nil || c.Actor != p.Actor() {
		return c, nil
	}
	raw, err := marshalDetail(c.Detail)
	if err != nil {
		return c, err
	}
	detail := map[string]json.RawMessage{}
	if err := json.Unmarshal(raw, &detail); err != nil {
		return c, fmt.Errorf("event detail of %s is not an object: %w", c.Kind, err)
	}
	person, err := json.Marshal(p)
	if err != nil {
		return c, err
	}
	detail["person"] = person
	merged, err := json.Marshal(detail)
	if err != nil {
		return c, err
	}
	c.Detail = json.RawMessage(merged)
	return c, nil
}
