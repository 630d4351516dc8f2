package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/sys/unix"
)

// errNotConfirmed: the person at the terminal did not say yes.
var errNotConfirmed = errors.New("not approved: nothing changed")

// isTerminal reports whether r is a terminal: an open file for which the
// terminal driver answers (TCGETS). A pipe, a regular file and /dev/null
// are not, whatever their mode says.
func isTerminal(r io.Reader) bool {
	f, ok := r.(interface{ Fd() uintptr })
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// confirm asks question on w and reads the answer from in, a terminal: nil
// for y or yes (any case), errNotConfirmed for anything else or an end of
// input. It gives up when ctx ends (Ctrl-C).
func confirm(ctx context.Context, in io.Reader, w io.Writer, question string) error {
	fmt.Fprint(w, question)
	answer := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(in).ReadString('\n')
		answer <- line
	}()
	select {
	case <-ctx.Done():
		fmt.Fprintln(w)
		return errNotConfirmed
	case line := <-answer:
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "y", "yes":
			return nil
		}
		return errNotConfirmed
	}
}
