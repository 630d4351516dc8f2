// Package resources measures what a stretch of a benchmark cost the
// machine: the CPU time of the benchmark's own process, of the Postgres
// processes that serve it and of nats-server, how busy the whole machine
// was, and how many bytes Postgres wrote to its WAL.
//
// A rate alone does not say why one system is faster than another on the
// same cores; the CPU each process spends per completed operation, and the
// WAL each operation writes, do. Both actbench (cmd/actbench) and the
// peers harness (bench/peers) measure with this one package, so that
// their figures are taken the same way and can be set side by side.
//
// It reads Linux's /proc and getrusage and is meant for benchmarks only:
// on other systems, or where /proc cannot be read, the servers' and the
// machine's figures are zero.
package resources
