// Package testcluster starts a real three-node NATS JetStream cluster for a
// test: three nats-server processes on loopback ports, joined by routes,
// each with its own store directory under t.TempDir().
//
// Real processes, not embedded servers, because the faults the cluster
// tests prove are process faults: a SIGKILL loses whatever the process had
// not written, closes its sockets without a goodbye, and leaves its store
// directory as it was at that instant. An embedded server can only be shut
// down politely, which flushes and says goodbye, and it shares the test's
// process, so it could never be killed without killing the test.
//
// The binary is NATS_SERVER (default: nats-server on PATH, then
// /usr/sbin/nats-server). A missing binary fails the test: the cluster
// tests are part of CI, and a skipped proof is no proof.
//
// The server configuration (Config) is the one compose.yaml's cluster
// profile runs, less its user accounts: JetStream with file storage, a
// cluster of three named nodes, and `sync_interval: always` (an fsync per
// write) on servers that know it (2.10 and later; 2.9 refuses the key and
// syncs on its own interval, two minutes by default).
package testcluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Size is the number of nodes: the smallest cluster that keeps a quorum
// of streams at 3 replicas with one node down.
const Size = 3

// ClusterName is the cluster's name, as in compose.yaml.
const ClusterName = "actledger"

// Binary is the nats-server the cluster runs.
func Binary() (string, error) {
	if b := os.Getenv("NATS_SERVER"); b != "" {
		return b, nil
	}
	if b, err := exec.LookPath("nats-server"); err == nil {
		return b, nil
	}
	const fallback = "/usr/sbin/nats-server"
	if _, err := os.Stat(fallback); err != nil {
		return "", errors.New("testcluster: no nats-server binary (PATH, /usr/sbin/nats-server or NATS_SERVER): install nats-server 2.9 or later")
	}
	return fallback, nil
}

// Version is the binary's version ("2.9.10").
func Version(binary string) (string, error) {
	out, err := exec.Command(binary, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("testcluster: %s --version: %w: %s", binary, err, out)
	}
	m := regexp.MustCompile(`v?(\d+\.\d+\.\d+)`).FindStringSubmatch(string(out))
	if m == nil {
		return "", fmt.Errorf("testcluster: %s --version: no version in %q", binary, out)
	}
	return m[1], nil
}

// SupportsSyncAlways reports whether a server version accepts
// `jetstream { sync_interval: always }` (added in 2.10.0).
func SupportsSyncAlways(version string) bool {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, _ := strconv.Atoi(parts[0])
	minor, _ := strconv.Atoi(parts[1])
	return major > 2 || (major == 2 && minor >= 10)
}

// Config is one node's configuration file. clusterPorts are every node's
// route port (its own included, as compose.yaml lists them: a server
// ignores the route to itself).
func Config(name string, clientPort, clusterPort int, clusterPorts []int, storeDir string, syncAlways bool) string {
	var routes []string
	for _, p := range clusterPorts {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	sync := ""
	if syncAlways {
		sync = "\n  sync_interval: always"
	}
	return fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
jetstream {
  store_dir: %q%s
}
cluster {
  name: %s
  listen: 127.0.0.1:%d
  routes: [%s]
}
`, name, clientPort, storeDir, sync, ClusterName, clusterPort, strings.Join(routes, ", "))
}

// TB is the part of TB the cluster uses; cmd/actchaos, which runs
// the cluster outside a test, supplies its own.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
	TempDir() string
	Failed() bool
}

var _ TB = testing.TB(nil)

// Node is one server of the cluster.
type Node struct {
	Name        string
	ClientPort  int
	ClusterPort int
	StoreDir    string
	ConfFile    string
	LogFile     string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// URL is the node's client URL.
func (n *Node) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.ClientPort) }

// Running reports whether the node's process is alive.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// Cluster is a running three-node cluster.
type Cluster struct {
	t          TB
	Binary     string
	Version    string
	SyncAlways bool
	Nodes      []*Node
}

// New starts the cluster and waits until JetStream answers on every node
// (a meta leader is elected); it stops the processes when t ends.
func New(t TB) *Cluster {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	version, err := Version(bin)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, Binary: bin, Version: version, SyncAlways: SupportsSyncAlways(version)}
	dir := t.TempDir()
	ports := FreePorts(t, 2*Size)
	var clusterPorts []int
	for i := range Size {
		clusterPorts = append(clusterPorts, ports[Size+i])
	}
	for i := range Size {
		n := &Node{
			Name:        fmt.Sprintf("n%d", i+1),
			ClientPort:  ports[i],
			ClusterPort: clusterPorts[i],
			StoreDir:    filepath.Join(dir, fmt.Sprintf("n%d", i+1), "store"),
		}
		n.ConfFile = filepath.Join(dir, n.Name, "nats.conf")
		n.LogFile = filepath.Join(dir, n.Name, "nats.log")
		if err := os.MkdirAll(n.StoreDir, 0o755); err != nil {
			t.Fatal(err)
		}
		conf := Config(n.Name, n.ClientPort, n.ClusterPort, clusterPorts, n.StoreDir, c.SyncAlways)
		if err := os.WriteFile(n.ConfFile, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		c.Nodes = append(c.Nodes, n)
	}
	// Registered after TempDir, so it runs before the directory goes.
	t.Cleanup(func() {
		for _, n := range c.Nodes {
			c.stop(n, syscall.SIGKILL)
		}
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("%s log tail:\n%s", n.Name, tail(n.LogFile, 30))
			}
		}
	})
	for _, n := range c.Nodes {
		c.Start(n)
	}
	c.WaitReady(60 * time.Second)
	t.Logf("testcluster: nats-server %s, 3 nodes %s, sync_interval always: %v", version, c.URLs(), c.SyncAlways)
	return c
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// FreePorts returns n distinct loopback ports that nothing listens on,
// drawn at random below the kernel's ephemeral range (read from
// /proc/sys/net/ipv4/ip_local_port_range, default 32768). A port the
// kernel hands out for ":0" or for an outgoing connection's local end
// could be taken by any of the many connections a test run makes between
// the check and the server's bind (it happened: "bind: address already in
// use"); a port below the range is taken only by an explicit bind.
func FreePorts(t TB, n int) []int {
	t.Helper()
	low := 10000
	high := ephemeralLow() - 1
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			t.Fatalf("testcluster: no %d free ports in %d-%d", n, low, high)
		}
		port := low + rand.IntN(high-low)
		if slices.Contains(ports, port) {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		ln.Close()
		ports = append(ports, port)
	}
	return ports
}

func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 11000 {
				return n
			}
		}
	}
	return 32768
}

// URLs is the comma-separated client URL list of every node, as NATS_URL
// takes it.
func (c *Cluster) URLs() string {
	var urls []string
	for _, n := range c.Nodes {
		urls = append(urls, n.URL())
	}
	return strings.Join(urls, ",")
}

// Node returns the node named name.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	c.t.Fatalf("testcluster: no node %q", name)
	return nil
}

// Start starts n's process (again) with its store directory as it is.
func (c *Cluster) Start(n *Node) {
	c.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		c.t.Fatalf("testcluster: %s is already running", n.Name)
	}
	logStart := logSize(n.LogFile)
	cmd := exec.Command(c.Binary, "-c", n.ConfFile, "-l", n.LogFile)
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("testcluster: start %s: %v", n.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	n.cmd, n.done = cmd, done
	// A server that cannot bind its ports exits at once: say so now
	// rather than as a timeout later. A dial alone could reach another
	// process on the port; "Server is ready" is this server's own word.
	if err := waitReadyLog(n.LogFile, logStart, done, 20*time.Second); err != nil {
		n.cmd = nil
		c.t.Fatalf("testcluster: %s: %v\n%s", n.Name, err, tail(n.LogFile, 20))
	}
}

// waitReadyLog waits until the server's log, since this start, says it
// is ready, or the process exits.
func waitReadyLog(logFile string, start int64, done <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-done:
			return errors.New("the process exited")
		default:
		}
		if b, err := os.ReadFile(logFile); err == nil && int64(len(b)) >= start &&
			strings.Contains(string(b[start:]), "Server is ready") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func logSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// Kill sends SIGKILL to n and waits for the process to be gone.
func (c *Cluster) Kill(n *Node) { c.stop(n, syscall.SIGKILL) }

func (c *Cluster) stop(n *Node, sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(sig)
	<-n.done
	n.cmd, n.done = nil, nil
}

// Wipe removes n's store directory (n must be down), as a replaced disk
// or a fresh machine would come back.
func (c *Cluster) Wipe(n *Node) {
	c.t.Helper()
	if n.Running() {
		c.t.Fatalf("testcluster: wipe %s while it runs", n.Name)
	}
	if err := os.RemoveAll(n.StoreDir); err != nil {
		c.t.Fatal(err)
	}
	if err := os.MkdirAll(n.StoreDir, 0o755); err != nil {
		c.t.Fatal(err)
	}
}

// WaitReady waits until every running node answers a JetStream account
// request, which needs an elected meta leader, and until the meta leader
// places a stream with a replica on every running node. A meta leader can
// answer before it counts its peers as current: a stream created then
// fails with "no suitable peers for placement" (it happened on a loaded
// machine, right after the cluster started).
func (c *Cluster) WaitReady(timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	running := 0
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		running++
		for {
			err := accountInfo(n.URL())
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("testcluster: %s has no JetStream after %s: %v\n%s", n.Name, timeout, err, tail(n.LogFile, 20))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if running == 0 {
		return
	}
	for {
		err := placeProbe(c.URLs(), running)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("testcluster: cannot place a stream on %d nodes after %s: %v", running, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// withJetStream connects to urls, runs f with a JetStream context and a
// deadline of timeout, and disconnects.
func withJetStream(urls string, timeout time.Duration, f func(context.Context, jetstream.JetStream) error) error {
	nc, err := nats.Connect(urls, nats.Timeout(2*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return f(ctx, js)
}

// placeProbe creates a stream with a replica on each of replicas nodes and
// deletes it again.
func placeProbe(urls string, replicas int) error {
	return withJetStream(urls, 5*time.Second, func(ctx context.Context, js jetstream.JetStream) error {
		name := fmt.Sprintf("TCPROBE_%d", time.Now().UnixNano())
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
			Name: name, Subjects: []string{name}, Replicas: replicas, Storage: jetstream.MemoryStorage,
		}); err != nil {
			return err
		}
		return js.DeleteStream(ctx, name)
	})
}

func accountInfo(url string) error {
	return withJetStream(url, 2*time.Second, func(ctx context.Context, js jetstream.JetStream) error {
		_, err := js.AccountInfo(ctx)
		return err
	})
}

// StreamInfo asks the cluster (any running node) about a stream.
func (c *Cluster) StreamInfo(name string) (*jetstream.StreamInfo, error) {
	var info *jetstream.StreamInfo
	err := withJetStream(c.URLs(), 5*time.Second, func(ctx context.Context, js jetstream.JetStream) error {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return err
		}
		info = s.CachedInfo()
		return nil
	})
	return info, err
}

// StreamLeader waits until stream has a leader and returns its node.
func (c *Cluster) StreamLeader(stream string, timeout time.Duration) *Node {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		info, err := c.StreamInfo(stream)
		if err == nil && info.Cluster != nil && info.Cluster.Leader != "" {
			return c.Node(info.Cluster.Leader)
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("testcluster: stream %s has no leader after %s (last error: %v)", stream, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// WaitCurrent waits until stream has a leader and every replica is
// current (caught up with it), and returns the info.
func (c *Cluster) WaitCurrent(stream string, timeout time.Duration) *jetstream.StreamInfo {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		info, err := c.StreamInfo(stream)
		if err == nil && info.Cluster != nil && info.Cluster.Leader != "" && len(info.Cluster.Replicas) == Size-1 {
			current := true
			for _, r := range info.Cluster.Replicas {
				current = current && r.Current && !r.Offline
			}
			if current {
				return info
			}
		}
		if time.Now().After(deadline) {
			desc := fmt.Sprint(err)
			if info != nil && info.Cluster != nil {
				desc = fmt.Sprintf("leader %q replicas %+v", info.Cluster.Leader, info.Cluster.Replicas)
			}
			c.t.Fatalf("testcluster: stream %s not current on every node after %s: %s", stream, timeout, desc)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
