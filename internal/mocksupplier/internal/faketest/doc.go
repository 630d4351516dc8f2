// Package faketest is the setup the tests of the fakes under internal/mocksupplier share: a clock a test
// moves (Clock), a fake served over a real socket to a client that never reuses connections
// (Serve, Client), one request and the reply it got (Do, JSON, Reply), a webhook receiver that
// answers the statuses a test asks for (Receiver, Next), and a poll with a deadline (WaitFor).
// Each fake's tests keep what is their API's: its credentials, its request bodies, how its
// answers are read.
//
// It is for the tests of the fakes only, as internal/ makes sure for everything outside
// internal/mocksupplier/; no production code path of actledger may import it, nor any fake outside its
// tests.
package faketest
