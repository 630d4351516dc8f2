package broker_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/actledger/actledger/broker"
)

// authServer starts a real nats-server with JetStream on a random loopback
// port, configured by edit, and returns its client URL (scheme given).
func authServer(t *testing.T, scheme string, edit func(*server.Options)) string {
	t.Helper()
	opts := &server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(),
		NoSigs: true, NoLog: true,
	}
	edit(opts)
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	return scheme + "://" + ns.Addr().String()
}

func connect(t *testing.T, cfg broker.Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cfg.Prefix, cfg.MemoryStorage, cfg.Logger = "AUTHTEST", true, slog.New(slog.DiscardHandler)
	b, err := broker.Connect(ctx, cfg)
	if err == nil {
		if err := b.Ping(ctx); err != nil {
			t.Errorf("connected but JetStream does not answer: %v", err)
		}
		b.Close()
	}
	return err
}

// TestRemoteServerRequiringAUserRefusesAConnectionWithoutCredentials: a
// server configured with a user refuses actledger without NATS_USER and
// NATS_PASSWORD, with an error saying what to set and never the password,
// and accepts it with them.
func TestRemoteServerRequiringAUserRefusesAConnectionWithoutCredentials(t *testing.T) {
	t.Parallel()
	const password = "s3cret-nats-password"
	url := authServer(t, "nats", func(o *server.Options) {
		o.Users = []*server.User{{Username: "actledger", Password: password}}
	})

	err := connect(t, broker.Config{URL: url})
	if err == nil || !strings.Contains(err.Error(), "refused the connection (no credentials were given)") || !strings.Contains(err.Error(), "NATS_USER") {
		t.Errorf("without credentials: %v, want a refusal naming NATS_USER", err)
	}
	err = connect(t, broker.Config{URL: url, User: "actledger", Password: "wrong-password"})
	if err == nil || strings.Contains(err.Error(), "wrong-password") {
		t.Errorf("with a wrong password: %v, want an error that does not show the password", err)
	}
	for _, bad := range []string{"nats://actledger:wrong-in-url@", "nats://actledger:wrong-in-url@x"} {
		if err := connect(t, broker.Config{URL: strings.Replace(url, "nats://", bad, 1)}); err == nil || strings.Contains(err.Error(), "wrong-in-url") {
			t.Errorf("URL with a password: %v, want an error that does not show the password", err)
		}
	}
	if err := connect(t, broker.Config{URL: url, User: "actledger", Password: password}); err != nil {
		t.Errorf("with NATS_USER/NATS_PASSWORD: %v", err)
	}
}

// TestRemoteServerAcceptsAnNkeySeedFile: NATS_NKEY names a seed file whose
// public key the server lists.
func TestRemoteServerAcceptsAnNkeySeedFile(t *testing.T) {
	t.Parallel()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile := filepath.Join(t.TempDir(), "actledger.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	url := authServer(t, "nats", func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} })
	if err := connect(t, broker.Config{URL: url}); err == nil {
		t.Error("connected without the nkey")
	}
	if err := connect(t, broker.Config{URL: url, NkeyFile: seedFile}); err != nil {
		t.Errorf("with NATS_NKEY: %v", err)
	}
}

// TestTLSURLVerifiesTheServerWithTheGivenCA: a tls:// URL is TLS; a
// server certificate from a private CA is trusted only with NATS_CA.
func TestTLSURLVerifiesTheServerWithTheGivenCA(t *testing.T) {
	t.Parallel()
	caFile, serverTLS := privateCA(t)
	url := authServer(t, "tls", func(o *server.Options) {
		o.TLSConfig, o.TLS, o.TLSVerify = serverTLS, true, false
		o.Users = []*server.User{{Username: "actledger", Password: "pw"}}
	})
	if err := connect(t, broker.Config{URL: url, User: "actledger", Password: "pw"}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without NATS_CA: %v, want a certificate error", err)
	}
	if err := connect(t, broker.Config{URL: url, User: "actledger", Password: "pw", CAFile: caFile}); err != nil {
		t.Errorf("with NATS_CA: %v", err)
	}
}

func TestCredentialsThatCannotBeMeantAreRefusedBeforeConnecting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  broker.Config
		want string
	}{
		{"two kinds", broker.Config{URL: "nats://127.0.0.1:1", User: "u", Password: "p", NkeyFile: "x"}, "give one kind of NATS credentials"},
		{"user without password", broker.Config{URL: "nats://127.0.0.1:1", User: "u"}, "NATS_USER and NATS_PASSWORD go together"},
		{"credentials for the embedded server", broker.Config{DataDir: t.TempDir(), User: "u", Password: "p"}, "NATS_URL is empty"},
		{"missing creds file", broker.Config{URL: "nats://127.0.0.1:1", CredsFile: "/nonexistent/actledger.creds"}, "NATS_CREDS"},
	}
	for _, tt := range tests {
		if err := connect(t, tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}

// privateCA makes a CA (written to a PEM file) and a server certificate
// for 127.0.0.1 signed by it.
func privateCA(t *testing.T) (caFile string, cfg *tls.Config) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "actledger test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return caFile, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
}

// TestRemoteServerAcceptsACredsFile: NATS_CREDS names a credentials file
// (user JWT and seed) issued under the operator the server trusts.
func TestRemoteServerAcceptsACredsFile(t *testing.T) {
	t.Parallel()
	operator, _ := nkeys.CreateOperator()
	operatorPub, _ := operator.PublicKey()
	oc := jwt.NewOperatorClaims(operatorPub)
	account, _ := nkeys.CreateAccount()
	accountPub, _ := account.PublicKey()
	ac := jwt.NewAccountClaims(accountPub)
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	accountJWT, err := ac.Encode(operator)
	if err != nil {
		t.Fatal(err)
	}
	system, _ := nkeys.CreateAccount()
	systemPub, _ := system.PublicKey()
	systemJWT, err := jwt.NewAccountClaims(systemPub).Encode(operator)
	if err != nil {
		t.Fatal(err)
	}
	user, _ := nkeys.CreateUser()
	userPub, _ := user.PublicKey()
	uc := jwt.NewUserClaims(userPub)
	uc.IssuerAccount = accountPub
	userJWT, err := uc.Encode(account)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := user.Seed()
	creds, err := jwt.FormatUserConfig(userJWT, seed)
	if err != nil {
		t.Fatal(err)
	}
	credsFile := filepath.Join(t.TempDir(), "actledger.creds")
	if err := os.WriteFile(credsFile, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	resolver := &server.MemAccResolver{}
	for pub, j := range map[string]string{accountPub: accountJWT, systemPub: systemJWT} {
		if err := resolver.Store(pub, j); err != nil {
			t.Fatal(err)
		}
	}
	url := authServer(t, "nats", func(o *server.Options) {
		o.TrustedOperators = []*jwt.OperatorClaims{oc}
		o.AccountResolver = resolver
		o.SystemAccount = systemPub
	})
	if err := connect(t, broker.Config{URL: url}); err == nil {
		t.Error("connected without the creds file")
	}
	if err := connect(t, broker.Config{URL: url, CredsFile: credsFile}); err != nil {
		t.Errorf("with NATS_CREDS: %v", err)
	}
}

// TestTLSURLNeverFallsBackToPlaintext: a tls:// URL pointing at a server
// that offers no TLS is refused; the user and password are not sent in
// the clear.
func TestTLSURLNeverFallsBackToPlaintext(t *testing.T) {
	t.Parallel()
	plain := authServer(t, "nats", func(o *server.Options) {
		o.Users = []*server.User{{Username: "actledger", Password: "pw"}}
	})
	if err := connect(t, broker.Config{URL: plain, User: "actledger", Password: "pw"}); err != nil {
		t.Fatalf("nats:// to the plaintext server: %v", err)
	}
	tlsURL := "tls://" + strings.TrimPrefix(plain, "nats://")
	if err := connect(t, broker.Config{URL: tlsURL, User: "actledger", Password: "pw"}); err == nil {
		t.Error("tls:// connected to a server without TLS")
	} else if strings.Contains(err.Error(), "pw@") {
		t.Errorf("the error shows the password: %v", err)
	}
}
