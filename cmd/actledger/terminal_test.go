package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openTerminal opens a pseudo-terminal: the program's side (a terminal to
// read from) and the person's side (to type on).
func openTerminal(t *testing.T) (program, person *os.File) {
	t.Helper()
	person, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { person.Close() })
	if err := unix.IoctlSetPointerInt(int(person.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(person.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("name the pseudo-terminal: %v", err)
	}
	program, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open the pseudo-terminal's terminal: %v", err)
	}
	t.Cleanup(func() { program.Close() })
	return program, person
}

// TestIsTerminalTellsATerminalFromAPipeAFileAndDevNull: only a real
// terminal is one; /dev/null is a character device but no terminal.
func TestIsTerminalTellsATerminalFromAPipeAFileAndDevNull(t *testing.T) {
	t.Parallel()
	program, _ := openTerminal(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	file, err := os.CreateTemp(t.TempDir(), "stdin")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for _, tc := range []struct {
		name string
		in   io.Reader
		want bool
	}{
		{"pseudo-terminal", program, true},
		{"pipe", r, false},
		{"/dev/null", devNull, false},
		{"regular file", file, false},
		{"reader", strings.NewReader("y\n"), false},
	} {
		if got := isTerminal(tc.in); got != tc.want {
			t.Errorf("isTerminal(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// status reads the operation's status as token sees it.
func (in *instance) status(t *testing.T, token, id string) string {
	t.Helper()
	return fmt.Sprint(get(t, in.base+"/v1/operations/"+id, token)["status"])
}

// proposeBig makes a proposal over the demo policy, so a person decides;
// its reason is the agent's text.
func (in *instance) proposeBig(t *testing.T, agent, key, reason string) (id, fingerprint string) {
	t.Helper()
	quoted, _ := json.Marshal(reason)
	out := post(t, in.base+"/v1/operations", agent, fmt.Sprintf(
		`{"action":"supplier.create_order","key":%q,"params":{"sku":"A-1","qty":900},"request_approval":true,"reason":%s}`, key, quoted))
	if out["status"] != "awaiting_approval" {
		t.Fatalf("proposal is %v, want awaiting_approval", out["status"])
	}
	return out["id"].(string), out["params_fingerprint"].(string)
}

// TestApprovalsListShowsAReasonThatForgesParamsEscaped: a reason holding
// line breaks and a terminal escape that conceals the rest of the line
// prints as one line of escapes: the only params line is the real one
// (qty 900), and no control character reaches the terminal.
func TestApprovalsListShowsAReasonThatForgesParamsEscaped(t *testing.T) {
	t.Parallel()
	in := startServe(t)
	approver, agent := in.token(t, "approver"), in.token(t, "agent")
	forged := "restock\n  params: {\"qty\":1,\"sku\":\"A-1\"}\n  fingerprint: jcs-sha256:0000\r\x1b[8m"
	in.proposeBig(t, agent, "po-forged", forged)

	list := in.approvals(t, approver, "list")
	for _, r := range list {
		if r != '\n' && r < 0x20 {
			t.Errorf("approvals list prints the control character %U raw:\n%q", r, list)
		}
	}
	var params []string
	for _, line := range strings.Split(list, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "params:") {
			params = append(params, line)
		}
	}
	if len(params) != 1 || !strings.Contains(params[0], `"qty":900`) {
		t.Errorf("params lines %q, want only the real one (qty 900):\n%s", params, list)
	}
	if want := `  reason: restock\u000a  params: {"qty":1,"sku":"A-1"}\u000a  fingerprint: jcs-sha256:0000\u000d\u001b[8m`; !strings.Contains(list, want+"\n") {
		t.Errorf("approvals list does not show the reason escaped on its own line, want %s:\n%s", want, list)
	}
}

// TestApprovalsApproveWithoutFingerprintRefusesWithoutATerminal: with no
// --fingerprint and stdin not a terminal (a pipe, a script), nobody can
// have confirmed the params: the command refuses, names --fingerprint,
// and nothing is approved.
func TestApprovalsApproveWithoutFingerprintRefusesWithoutATerminal(t *testing.T) {
	t.Parallel()
	in := startServe(t)
	approver, agent := in.token(t, "approver"), in.token(t, "agent")
	id, _ := in.proposeBig(t, agent, "po-piped", "restock")
	var out bytes.Buffer
	err := approvals(t.Context(), in.clientEnv(approver), []string{"approve", id}, strings.NewReader("yes\n"), &out)
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--fingerprint") || !strings.Contains(err.Error(), "not a terminal") {
		t.Errorf("approve from a pipe = %v, want a usage error naming --fingerprint", err)
	}
	if got := in.status(t, agent, id); got != "awaiting_approval" {
		t.Errorf("operation is %s, want awaiting_approval (nothing approved)", got)
	}
}

// TestApprovalsApproveWithoutFingerprintAsksOnATerminal: on a terminal
// the command shows the params it would approve, escaped, and approves
// only when the person types yes.
func TestApprovalsApproveWithoutFingerprintAsksOnATerminal(t *testing.T) {
	t.Parallel()
	in := startServe(t)
	approver, agent := in.token(t, "approver"), in.token(t, "agent")
	id, fingerprint := in.proposeBig(t, agent, "po-asked", "restock")
	approve := func(answer string) (string, error) {
		t.Helper()
		program, person := openTerminal(t)
		if _, err := person.WriteString(answer); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		var out bytes.Buffer
		err := approvals(ctx, in.clientEnv(approver), []string{"approve", id}, program, &out)
		return out.String(), err
	}

	out, err := approve("n\n")
	if !errors.Is(err, errNotConfirmed) {
		t.Errorf("approve answered no = %v, want errNotConfirmed", err)
	}
	for _, want := range []string{`params: {"qty":900,"sku":"A-1"}`, "fingerprint: " + fingerprint, "Approve exactly these params? [y/N]"} {
		if !strings.Contains(out, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, out)
		}
	}
	if got := in.status(t, agent, id); got != "awaiting_approval" {
		t.Fatalf("after no: operation is %s, want awaiting_approval", got)
	}

	out, err = approve("yes\n")
	if err != nil || !strings.Contains(out, id+" is queued under approval") {
		t.Fatalf("approve answered yes = %v:\n%s", err, out)
	}
}

// TestOpsShowPrintsNoControlCharacterOfTheServer: `ops show` prints the
// agent's reason (in the history) and the approver's deny reason (in the
// summary and the history) escaped: nothing of theirs moves the cursor,
// clears the screen or starts a line.
func TestOpsShowPrintsNoControlCharacterOfTheServer(t *testing.T) {
	t.Parallel()
	in := startServe(t)
	approver, agent, operator := in.token(t, "approver"), in.token(t, "agent"), in.token(t, "operator")
	id, _ := in.proposeBig(t, agent, "po-shown", "restock\x1b[2J\nstatus: succeeded")
	if out := in.approvals(t, approver, "deny", id, "--reason", "no\rstatus: succeeded\u202e"); !strings.Contains(out, `no\u000dstatus: succeeded\u202e`) {
		t.Errorf("approvals deny does not print the reason escaped:\n%q", out)
	}
	out := in.ops(t, operator, "show", id)
	for _, r := range out {
		if r != '\n' && r < 0x20 || r == '\u202e' {
			t.Fatalf("ops show prints %U raw:\n%q", r, out)
		}
	}
	// The summary is text, the history's details are JSON (whose own
	// escapes stand).
	for _, want := range []string{`summary:            A person declined the supplier.create_order request (no\u000dstatus: succeeded\u202e)`,
		`"reason":"restock\u001b[2J\nstatus: succeeded"`, `"reason":"no\rstatus: succeeded\u202e"`} {
		if !strings.Contains(out, want) {
			t.Errorf("ops show lacks %s:\n%s", want, out)
		}
	}
}
