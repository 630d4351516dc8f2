package main

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// serveProcess is an `actledger serve` running as a process of its own
// (the test binary re-run as TestServeProcess), so that a test can kill it
// with SIGKILL, split the roles over several processes, or give each its
// own environment.
type serveProcess struct {
	cmd *exec.Cmd
	// done is closed when the process has exited.
	done <-chan struct{}
	// out is what it wrote to stdout and stderr.
	out *lockedBuffer
	// stop ends it with SIGTERM and fails the test if it does not exit
	// cleanly within 30 s; it runs again, as a no-op, when the test ends.
	stop func()
}

// startServeProcess starts `actledger serve` (with --roles roles, unless
// roles is empty: every role) with the instance's environment and extra
// variables, and waits until its API answers when it runs one. The
// process is stopped when the test ends.
func startServeProcess(t *testing.T, in *instance, roles string, extra ...string) *serveProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeProcess$", "-test.count=1")
	env := []string{serveProcessEnv + "=1", serveRolesEnv + "=" + roles}
	for _, k := range []string{"DATABASE_URL", "NATS_URL", "STREAM_PREFIX", "LISTEN_ADDR", "PROVIDERS_FILE", "LEASE_DURATION", "ACME_WEBHOOK_SECRET"} {
		env = append(env, k+"="+in.getenv(k))
	}
	cmd.Env = append(append(env, extra...), "PATH="+os.Getenv("PATH"), "HOME="+os.Getenv("HOME"))
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited, done := make(chan error, 1), make(chan struct{})
	go func() {
		exited <- cmd.Wait()
		close(done)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			select {
			case <-done:
				return // killed by the test, or gone on its own
			default:
			}
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("serve --roles %q: %v\n%s", roles, err, out.String())
				}
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Errorf("serve --roles %q did not stop", roles)
			}
		})
	}
	t.Cleanup(stop)
	if roles == "" || strings.Contains(roles, "api") {
		waitReady(t, in.base, exited)
	}
	return &serveProcess{cmd: cmd, done: done, out: out, stop: stop}
}
