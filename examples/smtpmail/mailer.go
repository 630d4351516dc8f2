package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/textproto"
	"strings"
	"time"

	"github.com/actledger/actledger/provider"
)

// Mailer is a supplier actledger reaches by SMTP, not HTTP: a program that
// embeds actledger gives it for a provider name (app.Config.Providers),
// and the dispatcher claims, leases, classifies and reviews its
// operations exactly as it does an HTTP supplier's.
//
// SMTP has no idempotency key and no lookup: a message accepted by the
// server but whose final reply was lost is an unknown outcome that nothing
// can settle, so it goes to a person, never resent. The Message-ID header
// carries the operation's external key, so the person can find it in the
// mail server's log.
type Mailer struct {
	// Addr is the SMTP server's host:port.
	Addr string
	// From is the envelope and header sender.
	From string
	// Timeout bounds one delivery, connect to final reply.
	Timeout time.Duration
}

var _ provider.Provider = (*Mailer)(nil)

// mail is an operation's params.
type mail struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	Text    string `json:"text"`
}

// Create delivers one message and classifies the server's answer in the
// contract's classes: nothing sent (refused connection, a 4xx before the
// message) is not executed; a 5xx is a rejection with no effect; an error
// once the message's data was written is unknown.
func (m *Mailer) Create(ctx context.Context, req provider.CreateRequest) provider.Result {
	res := provider.Result{StartedAt: time.Now()}
	done := func(class provider.Class, sent bool, format string, args ...any) provider.Result {
		res.Class, res.Sent, res.EndedAt = class, sent, time.Now()
		res.Error = fmt.Sprintf(format, args...)
		return res
	}
	var msg mail
	if err := json.Unmarshal(req.Params, &msg); err != nil || msg.To == "" || strings.ContainsAny(msg.To+msg.Subject, "\r\n") {
		res.Review = provider.ReviewProviderConfigError
		return done(provider.ClassNotExecuted, false, "not sent: params must hold to, subject and text, without line breaks")
	}
	ctx, cancel := context.WithTimeout(ctx, m.Timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", m.Addr)
	if err != nil {
		return done(provider.ClassNotExecuted, false, "not sent: %v", err)
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	host, _, _ := net.SplitHostPort(m.Addr)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		return done(provider.ClassNotExecuted, false, "not sent: greeting: %v", err)
	}
	// Before DATA the server holds nothing: a refusal or a broken
	// connection leaves no message behind.
	for _, step := range []func() error{
		func() error { return c.Hello("actledger") },
		func() error { return c.Mail(m.From) },
		func() error { return c.Rcpt(msg.To) },
	} {
		if err := step(); err != nil {
			return done(refusal(err), false, "not sent: %v", err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return done(refusal(err), false, "not sent: DATA: %v", err)
	}
	body := fmt.Sprintf("From: %s\r\nTo: %s\r\nSubject: %s\r\nMessage-ID: <%s@actledger>\r\n\r\n%s\r\n",
		m.From, msg.To, msg.Subject, req.ExternalKey, strings.ReplaceAll(msg.Text, "\n", "\r\n"))
	if _, err := w.Write([]byte(body)); err != nil {
		return done(provider.ClassUnknown, true, "message partly written, may have been accepted: %v", err)
	}
	// The final reply is the only word that the message was accepted;
	// without it, it may have been.
	if err := w.Close(); err != nil {
		var reply *textproto.Error
		if errors.As(err, &reply) && reply.Code >= 500 {
			return done(provider.ClassRejected, true, "rejected: %v", err)
		}
		return done(provider.ClassUnknown, true, "no final reply, the message may have been accepted: %v", err)
	}
	_ = c.Quit()
	res.ProviderReference = "<" + req.ExternalKey + "@actledger>"
	return done(provider.ClassSucceeded, true, "")
}

// refusal classes an error before the message's data: a permanent reply
// (5xx) is a rejection, anything else (4xx, a broken connection) sent
// nothing the server kept.
func refusal(err error) provider.Class {
	var reply *textproto.Error
	if errors.As(err, &reply) && reply.Code >= 500 {
		return provider.ClassRejected
	}
	return provider.ClassNotExecuted
}

// Lookup: SMTP cannot ask whether a message was accepted. The providers
// file declares no lookup for this provider, so the dispatcher never
// calls it.
func (m *Mailer) Lookup(context.Context, provider.LookupRequest) provider.LookupResult {
	return provider.LookupResult{Status: provider.LookupError, Error: "SMTP has no lookup", At: time.Now()}
}
