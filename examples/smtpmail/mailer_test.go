package main

import (
	"bufio"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// smtpServer is an SMTP server for the test that keeps every message it
// accepted, and can lose its final reply: the message is kept (the
// server committed it), then the connection closes before "250".
type smtpServer struct {
	ln        net.Listener
	mu        sync.Mutex
	messages  []string
	loseReply int // how many final replies to lose
}

func startSMTP(t *testing.T) *smtpServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &smtpServer{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(conn)
		}
	}()
	return s
}

func (s *smtpServer) serve(conn net.Conn) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	say := func(line string) { _, _ = conn.Write([]byte(line + "\r\n")) }
	say("220 mail.test ESMTP")
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		switch verb := strings.ToUpper(strings.Fields(line + " x")[0]); verb {
		case "EHLO", "HELO":
			say("250 mail.test")
		case "MAIL", "RCPT", "RSET", "NOOP":
			say("250 OK")
		case "DATA":
			say("354 end with <CRLF>.<CRLF>")
			var msg strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				msg.WriteString(l)
			}
			s.mu.Lock()
			s.messages = append(s.messages, msg.String())
			lose := s.loseReply > 0
			if lose {
				s.loseReply--
			}
			s.mu.Unlock()
			if lose {
				return // accepted, reply lost
			}
			say("250 2.0.0 Ok: queued")
		case "QUIT":
			say("221 bye")
			return
		default:
			say("502 command not implemented")
		}
	}
}

// count is how many accepted messages carry reference.
func (s *smtpServer) count(reference string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.messages {
		if strings.Contains(m, "Message-ID: <"+reference+"@actledger>") {
			n++
		}
	}
	return n
}

func runMail(t *testing.T, loseReply int) (*testpipeline.Pipeline, ledger.Operation, *smtpServer) {
	t.Helper()
	file, err := os.ReadFile("providers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	smtpd := startSMTP(t)
	smtpd.loseReply = loseReply
	p := testpipeline.New(t, testpipeline.Options{
		ProvidersFile: string(file), Tenant: "acme-corp", Lease: 30 * time.Second,
		Implementations: Providers(smtpd.ln.Addr().String()),
	})
	op := p.EnqueueAction("email.send", "welcome-ann", `{"to":"ann@example.com","subject":"Welcome","text":"Hello Ann."}`)
	p.Start(1)
	return p, op, smtpd
}

// A program's own supplier (SMTP) is dispatched like an HTTP one: a
// message sent once is one message, its Message-ID the reference.
func TestMailerSendsOneMessage(t *testing.T) {
	t.Parallel()
	p, op, smtpd := runMail(t, 0)
	done := p.WaitStatus(op, ledger.StatusSucceeded, 15*time.Second)
	if smtpd.count(op.ExternalKey) != 1 || done.ProviderReference == nil || *done.ProviderReference != "<"+op.ExternalKey+"@actledger>" {
		t.Errorf("messages %d, reference %v; want 1 and the Message-ID; history:\n%s", smtpd.count(op.ExternalKey), done.ProviderReference, p.History(op))
	}
}

// The server accepted the message and the final reply was lost: the
// outcome is unknown, and with no key and no lookup nothing can settle
// it, so it goes to a person, never resent: one message.
func TestMailerLostFinalReplyGoesToAPersonNeverResent(t *testing.T) {
	t.Parallel()
	p, op, smtpd := runMail(t, 1)
	p.WaitStatus(op, ledger.StatusReview, 15*time.Second)
	done := p.NothingMore(op, 15*time.Second)
	if *done.ReviewReason != ledger.ReasonOutcomeUnknown || smtpd.count(op.ExternalKey) != 1 {
		t.Errorf("reason %s, messages %d; want outcome_unknown and 1; history:\n%s", *done.ReviewReason, smtpd.count(op.ExternalKey), p.History(op))
	}
	if kinds := strings.Join(p.Kinds(op), ","); !strings.Contains(kinds, "attempt") || strings.Count(kinds, "attempt") != 1 {
		t.Errorf("events %s: want exactly one attempt", kinds)
	}
}
