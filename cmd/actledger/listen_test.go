package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// serveProcessEnv marks the test binary re-run as an `actledger serve`
// process (TestServeProcess); serveRolesEnv, when set, is its --roles.
const (
	serveProcessEnv = "ACTLEDGER_TEST_SERVE_PROCESS"
	serveRolesEnv   = "ACTLEDGER_TEST_SERVE_ROLES"
)

// TestServeProcess is not a test: it is `actledger serve` in a process of
// its own, started by TestServeListensOnTheAPIAddressAndNothingElse, so
// that the process's sockets are serve's alone, and by
// TestServeExportsOneTraceAcrossTheAPIAndDispatcherProcesses, so that each
// process reads its own OTEL_* environment.
func TestServeProcess(t *testing.T) {
	if os.Getenv(serveProcessEnv) != "1" {
		t.Skip("runs only as the child of TestServeListensOnTheAPIAddressAndNothingElse")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	args := []string{"serve"}
	if roles := os.Getenv(serveRolesEnv); roles != "" {
		args = append(args, "--roles", roles)
	}
	if err := run(ctx, args, os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestServeListensOnTheAPIAddressAndNothingElse: with NATS_URL empty,
// serve runs the embedded JetStream in-process with no port, so the only
// listening socket of the process is the API's. (The embedded server used
// to listen on a random 127.0.0.1 port without authentication, where any
// local process could publish evidence.)
func TestServeListensOnTheAPIAddressAndNothingElse(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/net/tcp"); err != nil {
		t.Fatalf("this test reads the process's sockets from /proc (Linux): %v", err)
	}
	in := prepareServe(t, nil)
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeProcess$", "-test.count=1")
	env := []string{serveProcessEnv + "=1", "NATS_URL=", "NATS_DATA_DIR=" + filepath.Join(t.TempDir(), "nats")}
	for _, k := range []string{"DATABASE_URL", "STREAM_PREFIX", "LISTEN_ADDR", "PROVIDERS_FILE", "LEASE_DURATION", "ACME_WEBHOOK_SECRET"} {
		env = append(env, k+"="+in.getenv(k))
	}
	cmd.Env = append(env, "PATH="+os.Getenv("PATH"), "HOME="+os.Getenv("HOME"))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited: //nolint:errcheck // the status of a process stopped by a signal says nothing
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited //nolint:errcheck // as above
		}
	})
	waitReady(t, in.base, exited)

	ports, err := listeningTCPPorts(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	_, apiPort, _ := net.SplitHostPort(strings.TrimPrefix(in.base, "http://"))
	if want := []string{apiPort}; strings.Join(ports, ",") != strings.Join(want, ",") {
		t.Errorf("serve (pid %d) listens on TCP ports %v, want only the API's %v\n%s", cmd.Process.Pid, ports, want, out.String())
	}
}

// listeningTCPPorts lists the local ports of the TCP sockets in LISTEN
// state that process pid holds: the sockets of its network namespace
// (/proc/pid/net/tcp, tcp6) whose inodes are among its file descriptors.
func listeningTCPPorts(pid int) ([]string, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := make(map[string]bool)
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var ports []string
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			const listen = "0A"
			if len(fields) < 10 || fields[3] != listen || !inodes[fields[9]] {
				continue
			}
			_, hexPort, _ := strings.Cut(fields[1], ":")
			port, err := strconv.ParseUint(hexPort, 16, 16)
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("%s: local address %q: %w", table, fields[1], err)
			}
			ports = append(ports, strconv.FormatUint(port, 10))
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return ports, nil
}

// TestServeConnectsToARemoteNATSWithTheUserFromTheEnvironment: serve
// against a nats-server that requires a user stops with an error naming
// the variables to set when they are missing, never showing the password,
// and runs with NATS_USER and NATS_PASSWORD.
func TestServeConnectsToARemoteNATSWithTheUserFromTheEnvironment(t *testing.T) {
	t.Parallel()
	const password = "serve-test-nats-password"
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
		Users: []*server.User{{Username: "actledger", Password: password}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	in := prepareServe(t, nil)
	base := in.getenv
	with := func(vars map[string]string) func(string) string {
		return func(k string) string {
			if v, ok := vars[k]; ok {
				return v
			}
			return base(k)
		}
	}
	url := "nats://" + ns.Addr().String()

	err = run(t.Context(), []string{"serve"}, with(map[string]string{"NATS_URL": url}), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "NATS_USER and NATS_PASSWORD") {
		t.Errorf("serve without credentials = %v, want an error naming NATS_USER and NATS_PASSWORD", err)
	}
	err = run(t.Context(), []string{"serve"}, with(map[string]string{"NATS_URL": url, "NATS_USER": "actledger", "NATS_PASSWORD": "wrong-" + password}), io.Discard, io.Discard)
	if err == nil || strings.Contains(err.Error(), password) {
		t.Errorf("serve with a wrong password = %v, want an error that does not show it", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() {
		served <- run(ctx, []string{"serve"}, with(map[string]string{"NATS_URL": url, "NATS_USER": "actledger", "NATS_PASSWORD": password}), io.Discard, io.Discard)
	}()
	waitReady(t, in.base, served)
	cancel()
	if err := <-served; err != nil {
		t.Errorf("serve with NATS_USER/NATS_PASSWORD: %v", err)
	}
}

func TestServeRefusesAnUnusableEvidenceBound(t *testing.T) {
	t.Parallel()
	getenv := func(k string) string {
		switch k {
		case "EVIDENCE_UNAPPLIED_AFTER":
			return "soon"
		case "PROVIDERS_FILE":
			return "../../demo/providers.yaml"
		}
		return ""
	}
	err := run(t.Context(), []string{"serve"}, getenv, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `EVIDENCE_UNAPPLIED_AFTER="soon": not a positive duration`) {
		t.Errorf("serve = %v, want an error naming EVIDENCE_UNAPPLIED_AFTER", err)
	}
}
