// Package fault is the fault injection every fake under internal/mocksupplier shares, the demo
// supplier's and the fakes of real suppliers alike: the queues of faults their create requests
// take, one fault per request (Queue, and Queues for faults queued per reference), and the two
// things a fault does to an answer besides replacing it: losing it, so that the client sees the
// connection close (DropConnection), and holding it back (Hold). A lost answer after the commit
// is the unknown outcome actledger exists for: the effect is there and the client cannot tell.
// What a fault is (its kinds, where in a request it strikes, what it answers) stays with each
// fake, which knows its API; this package only queues the faults and carries out the losing and
// the holding.
//
// It is a test double: no production code path of actledger may import it (package app's
// TestProductPackagesImportNoTestDouble checks every package's imports). It reaches the
// actledger binary only inside the mock supplier that `actledger demo` runs; the process
// `actledger serve` runs links nothing under internal/mocksupplier/
// (TestServeWiringDoesNotLinkTheMockSupplier checks its import graph).
//
// Queue and Queues are not safe for concurrent use: a fake takes a fault under its own mutex,
// together with the rest of what it decides about the request (its idempotency key, its
// records), so that no other request sees half of that decision.
package fault
