package testpoll_test

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/testpoll"
)

// Until returns as soon as the check holds, after as many checks as it
// took.
func TestUntilReturnsOnceTheCheckHolds(t *testing.T) {
	t.Parallel()
	calls := 0
	testpoll.Until(t, 10*time.Second, func() error {
		calls++
		if calls < 3 {
			return fmt.Errorf("call %d", calls)
		}
		return nil
	})
	if calls != 3 {
		t.Errorf("%d checks, want 3", calls)
	}
}

// fatal is a test whose Fatalf records the message and ends the
// goroutine, as testing.T's does.
type fatal struct {
	testing.TB
	msg chan string
}

func (f *fatal) Fatalf(format string, args ...any) {
	f.msg <- fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// A check that never holds fails the test after the timeout, with its
// last answer.
func TestUntilFailsWithTheLastAnswerAfterTheTimeout(t *testing.T) {
	t.Parallel()
	f := &fatal{TB: t, msg: make(chan string, 1)}
	start := time.Now()
	go testpoll.Until(f, 100*time.Millisecond, func() error { return errors.New("still down") })
	msg := <-f.msg
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Errorf("failed after %s, before the timeout", took)
	}
	if want := "after 100ms: still down"; msg != want {
		t.Errorf("message %q, want %q", msg, want)
	}
}
