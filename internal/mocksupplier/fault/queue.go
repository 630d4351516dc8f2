package fault

// Queue is one queue of faults, taken head first. The zero value is an empty queue.
type Queue[F any] struct {
	faults []F
}

// Add appends faults to the end of the queue.
func (q *Queue[F]) Add(faults ...F) {
	q.faults = append(q.faults, faults...)
}

// Set replaces the whole queue with faults; none empties it.
func (q *Queue[F]) Set(faults ...F) {
	q.faults = append([]F(nil), faults...)
}

// Pending returns the faults not taken yet, in queue order.
func (q *Queue[F]) Pending() []F {
	return append([]F(nil), q.faults...)
}

// Len reports how many faults are queued.
func (q *Queue[F]) Len() int { return len(q.faults) }

// Take removes and returns the head of the queue, if there is one.
func (q *Queue[F]) Take() (F, bool) {
	return q.TakeIf(nil)
}

// TakeIf removes and returns the head of the queue if take accepts it (nil accepts any). A head
// it refuses stays where it is, and nothing behind it is looked at: faults strike in the order
// they were queued.
func (q *Queue[F]) TakeIf(take func(F) bool) (F, bool) {
	var zero F
	if len(q.faults) == 0 || take != nil && !take(q.faults[0]) {
		return zero, false
	}
	f := q.faults[0]
	q.faults[0] = zero
	q.faults = q.faults[1:]
	return f, true
}

// Queues is a queue of faults per reference, with a queue for the whole run behind them: a
// request that has a non-empty queue of its own takes from it, any other request from the
// run-wide queue. What a reference is (a client_reference, a string in a body, a metadata value)
// is the fake's to say. The zero value has no faults.
type Queues[F any] struct {
	byRef map[string]*Queue[F] // never holds an empty queue
	run   Queue[F]
}

// Set replaces the queue of reference; reference "" is the run-wide queue. No faults empties it.
func (q *Queues[F]) Set(reference string, faults ...F) {
	switch {
	case reference == "":
		q.run.Set(faults...)
	case len(faults) == 0:
		delete(q.byRef, reference)
	default:
		if q.byRef == nil {
			q.byRef = make(map[string]*Queue[F])
		}
		own := &Queue[F]{}
		own.Set(faults...)
		q.byRef[reference] = own
	}
}

// Clear empties every queue.
func (q *Queues[F]) Clear() {
	q.byRef = nil
	q.run.Set()
}

// Take takes the next fault of a request for reference: the head of reference's queue, or of the
// run-wide queue when reference has none.
func (q *Queues[F]) Take(reference string) (F, bool) {
	return q.TakeIf(reference, nil)
}

// TakeIf is Take for a head that take accepts (nil accepts any). The queue looked at is the same
// as Take's, and a head it refuses stays where it is.
func (q *Queues[F]) TakeIf(reference string, take func(F) bool) (F, bool) {
	if own, ok := q.byRef[reference]; ok {
		return q.takeOwn(reference, own, take)
	}
	return q.run.TakeIf(take)
}

// TakeMatch takes the next fault of a request that matches references rather than naming one:
// the head of a queue whose reference match accepts (if several do, any one of them), or else of
// the run-wide queue.
func (q *Queues[F]) TakeMatch(match func(reference string) bool) (F, bool) {
	for ref, own := range q.byRef {
		if match(ref) {
			return q.takeOwn(ref, own, nil)
		}
	}
	return q.run.Take()
}

func (q *Queues[F]) takeOwn(reference string, own *Queue[F], take func(F) bool) (F, bool) {
	f, ok := own.TakeIf(take)
	if own.Len() == 0 {
		delete(q.byRef, reference)
	}
	return f, ok
}
