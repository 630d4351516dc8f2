// Package traffic is the HTTP traffic of the fakes under internal/mocksupplier, as the tests that drive
// them see it: the requests a fake receives, recorded as they arrive (Log), and the webhooks it
// sends (Sender), each delivered after a delay and retried with a doubling backoff until the
// receiver answers 2xx, every attempt recorded as the fake's own Delivery type. A test reads
// both to check what reached the fake (a credential sent where it should not go shows in a
// recorded header) and what the fake told the receiver, and when. What a fake's webhook says
// and how it is signed stays with the fake (signatures come from package webhook, or from the
// fake itself for a scheme actledger does not speak); this package only sends, retries and
// records.
//
// It is a test double: no production code path of actledger may import it (package app's
// TestProductPackagesImportNoTestDouble checks every package's imports). It reaches the
// actledger binary only inside the mock supplier that `actledger demo` runs; the process
// `actledger serve` runs links nothing under internal/mocksupplier/
// (TestServeWiringDoesNotLinkTheMockSupplier checks its import graph).
package traffic
