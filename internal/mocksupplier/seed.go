package mocksupplier

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// The seeding helpers place at the supplier what a reconciliation must find there without
// actledger having made it: an order from elsewhere, a second order for one reference (a person
// who retried by hand), an order whose params differ from what was sent, an order gone, an order
// older or younger than it was. They change the store the statement, the lookups and Orders
// read, bypass keys and faults, and send no webhook. They act on memory only: with a data file,
// a restart forgets what they did.

// ErrNoOrder is the answer of a seeding helper about an order (or a reference) the supplier does
// not hold.
var ErrNoOrder = errors.New("no such order")

// Seed is an order SeedOrder places.
type Seed struct {
	// ClientReference is the order's reference; "" is an order made without one (foreign).
	ClientReference string
	// Params is the order's params, a JSON object; nil is {}.
	Params json.RawMessage
	// CreatedAt is when the order was created; zero is now.
	CreatedAt time.Time
}

// SeedOrder places an order at the supplier, as if created by other means, and returns it. It
// panics on Params that are not a JSON object, a bug in the calling test.
func (s *Server) SeedOrder(seed Seed) Order {
	params := json.RawMessage("{}")
	if seed.Params != nil {
		canonical, _, err := parseObject(seed.Params)
		if err != nil {
			panic("mocksupplier: SeedOrder: " + err.Error())
		}
		params = canonical
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := &Order{ID: newID("ord_"), ClientReference: seed.ClientReference, Status: "created", Params: params, CreatedAt: seed.CreatedAt.UTC()}
	if seed.CreatedAt.IsZero() {
		o.CreatedAt = s.now().UTC()
	}
	s.orders.add(o)
	return *o
}

// DuplicateOrder places a second order for reference with the params of its first, created
// now, as a person retrying by hand in the supplier's dashboard would, and returns it;
// ErrNoOrder when the reference has no order.
func (s *Server) DuplicateOrder(reference string) (Order, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	existing := s.orders.byRef[reference]
	if len(existing) == 0 {
		return Order{}, fmt.Errorf("duplicating the order of reference %q: %w", reference, ErrNoOrder)
	}
	o := &Order{ID: newID("ord_"), ClientReference: reference, Status: "created", Params: existing[0].Params, CreatedAt: s.now().UTC()}
	s.orders.add(o)
	return *o, nil
}

// SetOrderParams replaces order id's params (a JSON object): an order whose amount or quantity
// differs from what was sent. It panics on params that are not a JSON object.
func (s *Server) SetOrderParams(id string, params json.RawMessage) error {
	canonical, _, err := parseObject(params)
	if err != nil {
		panic("mocksupplier: SetOrderParams: " + err.Error())
	}
	return s.changeOrder(id, func(o *Order) { o.Params = canonical })
}

// SetOrderCreatedAt moves order id's created_at to t.
func (s *Server) SetOrderCreatedAt(id string, t time.Time) error {
	return s.changeOrder(id, func(o *Order) { o.CreatedAt = t.UTC() })
}

// RemoveOrder deletes order id, as if it had never been made (or the supplier lost it).
func (s *Server) RemoveOrder(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders.byID[id]
	if !ok {
		return fmt.Errorf("removing order %q: %w", id, ErrNoOrder)
	}
	s.orders.remove(o)
	return nil
}

// changeOrder replaces order id by a changed copy. Orders are never changed in place: answers
// are encoded from them outside the lock.
func (s *Server) changeOrder(id string, change func(*Order)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.orders.byID[id]
	if !ok {
		return fmt.Errorf("changing order %q: %w", id, ErrNoOrder)
	}
	c := *old
	change(&c)
	s.orders.replace(old, &c)
	return nil
}

func (st *orderStore) replace(old, o *Order) {
	st.byID[o.ID] = o
	swap := func(list []*Order) []*Order {
		out := slices.Clone(list)
		for i, p := range out {
			if p == old {
				out[i] = o
			}
		}
		return out
	}
	st.byRef[o.ClientReference] = swap(st.byRef[o.ClientReference])
	st.all = swap(st.all)
}

func (st *orderStore) remove(o *Order) {
	delete(st.byID, o.ID)
	other := func(p *Order) bool { return p == o }
	st.byRef[o.ClientReference] = slices.DeleteFunc(slices.Clone(st.byRef[o.ClientReference]), other)
	if len(st.byRef[o.ClientReference]) == 0 {
		delete(st.byRef, o.ClientReference)
	}
	st.all = slices.DeleteFunc(slices.Clone(st.all), other)
}
