package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/actledger/actledger/broker"
)

// facts head the report: what the figures were measured on.
type facts struct {
	Cores, GOMAXPROCS int
	GoVersion         string
	Postgres          string // server_version
	PostgresSettings  string // the settings that bound commit rates
	NATS              string // nats-server version
	JetStream         string // storage, replicas, sync
	// Load is the machine's load average (1, 5, 15 min) when the run
	// started: other work on the machine skews every figure.
	Load string
	// Revision is the git commit measured, and whether the work tree had
	// changes, when git can tell.
	Revision string
}

// revision asks git which commit the work tree is at.
func revision(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	head, err := exec.CommandContext(ctx, "git", "log", "-1", "--format=%h %s").Output()
	if err != nil {
		return ""
	}
	rev := strings.TrimSpace(string(head))
	if changed, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(changed) > 0 {
		rev += " (and uncommitted changes)"
	}
	return rev
}

// postgresSettings are the server settings that bound a commit rate.
const postgresSettings = `SELECT current_setting('server_version'), current_setting('synchronous_commit'),
    current_setting('fsync'), current_setting('wal_sync_method'), current_setting('shared_buffers'),
    current_setting('max_connections'), current_setting('autovacuum')`

// machineFacts asks the servers what they are: Postgres's version and
// commit settings; nats-server's version and the storage of a stream as
// actledger creates it (on a throwaway prefix). A remote nats-server does
// not tell its sync_interval, so the report says so.
func machineFacts(ctx context.Context, e *env) (facts, error) {
	f := facts{Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	f.Revision = revision(ctx)
	if raw, err := os.ReadFile("/proc/loadavg"); err == nil {
		if fields := strings.Fields(string(raw)); len(fields) >= 3 {
			f.Load = strings.Join(fields[:3], " ")
		}
	}
	conn, err := pgx.Connect(ctx, e.adminURL)
	if err != nil {
		return f, fmt.Errorf("connect to %s (is Postgres running? set BENCH_DATABASE_URL): %w", e.adminURL, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var syncCommit, fsync, walSync, buffers, maxConns, autovacuum string
	if err := conn.QueryRow(ctx, postgresSettings).Scan(&f.Postgres, &syncCommit, &fsync, &walSync, &buffers, &maxConns, &autovacuum); err != nil {
		return f, fmt.Errorf("read Postgres settings: %w", err)
	}
	f.PostgresSettings = fmt.Sprintf("synchronous_commit %s, fsync %s, wal_sync_method %s, shared_buffers %s, max_connections %s, autovacuum %s",
		syncCommit, fsync, walSync, buffers, maxConns, autovacuum)

	b, err := broker.Connect(ctx, broker.Config{URL: e.natsURL, Prefix: strings.ToUpper(uniqueName("BENCH")), Name: "actbench", Logger: quiet()})
	if err != nil {
		return f, fmt.Errorf("connect to NATS at %s (is nats-server -js running? set BENCH_NATS_URL): %w", e.natsURL, err)
	}
	defer func() {
		_ = b.DeleteStreams(context.WithoutCancel(ctx))
		b.Close()
	}()
	f.NATS = b.ServerVersion()
	s, err := b.JetStream().Stream(ctx, b.OpsStream())
	if err != nil {
		return f, fmt.Errorf("read the ops stream's settings: %w", err)
	}
	c := s.CachedInfo().Config
	f.JetStream = fmt.Sprintf("%s storage, %d replica(s), duplicate window %s; sync: server default (not verifiable remotely)",
		c.Storage, c.Replicas, c.Duplicates)
	return f, nil
}

// cpuMeter measures, around a stage, the CPU time of this process (the
// pipeline, the mock supplier and the load generator share it), of the
// servers (Postgres and nats-server, from /proc) and of the whole machine.
type cpuMeter struct {
	start       time.Time
	self        time.Duration
	servers     serverCPU
	busy, total uint64 // machine jiffies from /proc/stat; zero when unreadable
}

// cpuUse is what a cpuMeter saw.
type cpuUse struct {
	Wall time.Duration
	// Self is this process's user+system CPU time.
	Self time.Duration
	// Postgres is the CPU time of the backends serving this run's
	// databases plus the server's own processes (postmaster, WAL writer,
	// checkpointer…); NATS is nats-server's.
	Postgres, NATS time.Duration
	// Machine is the CPU time all processes used, from /proc/stat (zero
	// when it cannot be read).
	Machine time.Duration
	// Busy is the fraction of the machine's CPU capacity in use.
	Busy float64
}

// Other is the CPU time of everything else on the machine: work that is
// not the benchmark's and skews its figures.
func (u cpuUse) Other() time.Duration {
	return max(u.Machine-u.Self-u.Postgres-u.NATS, 0)
}

func startCPU() cpuMeter {
	busy, total := machineJiffies()
	return cpuMeter{start: time.Now(), self: processCPU(), servers: readServerCPU(), busy: busy, total: total}
}

func (m cpuMeter) stop() cpuUse {
	servers := readServerCPU()
	u := cpuUse{
		Wall: time.Since(m.start), Self: processCPU() - m.self,
		Postgres: max(servers.postgres-m.servers.postgres, 0), NATS: max(servers.nats-m.servers.nats, 0),
	}
	busy, total := machineJiffies()
	if total > m.total && m.total > 0 {
		u.Busy = float64(busy-m.busy) / float64(total-m.total)
		u.Machine = time.Duration(u.Busy * float64(u.Wall) * float64(runtime.NumCPU()))
	}
	return u
}

// serverCPU is the CPU time the servers' processes have used so far.
type serverCPU struct {
	postgres, nats time.Duration
}

// clockTick is the unit of /proc/PID/stat times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// readServerCPU sums, from /proc, the CPU time of nats-server and of the
// Postgres processes that work for this run: backends connected to an
// actbench_ database and the server's own processes (not other clients'
// backends). A backend that exits between two readings takes its time
// with it; the benchmark's connections live through each stage.
func readServerCPU() serverCPU {
	var c serverCPU
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return c
	}
	for _, e := range entries {
		pid := e.Name()
		if pid[0] < '0' || pid[0] > '9' {
			continue
		}
		raw, err := os.ReadFile("/proc/" + pid + "/cmdline")
		if err != nil {
			continue
		}
		cmd := string(raw)
		argv0, _, _ := strings.Cut(cmd, "\x00")
		var into *time.Duration
		switch {
		case strings.HasPrefix(cmd, "postgres: ") && strings.Contains(cmd, " actbench_"):
			into = &c.postgres // a backend of this run
		case strings.HasPrefix(cmd, "postgres: ") && !strings.Contains(cmd, "("):
			into = &c.postgres // walwriter, checkpointer, background writer…
		case strings.HasSuffix(argv0, "/postgres"):
			into = &c.postgres // the postmaster, which forks the backends
		case strings.HasSuffix(argv0, "nats-server"):
			into = &c.nats
		default:
			continue
		}
		*into += processTicks(pid)
	}
	return c
}

// processTicks reads utime + stime of process pid.
func processTicks(pid string) time.Duration {
	raw, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: count fields
	// after its closing parenthesis (field 3 is the state; 14 and 15 are
	// utime and stime).
	i := strings.LastIndexByte(string(raw), ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(raw[i+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseUint(fields[11], 10, 64)
	stime, err2 := strconv.ParseUint(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * clockTick
}

// per1000 is CPU seconds per 1,000 operations.
func per1000(cpu time.Duration, ops int) float64 {
	if ops == 0 {
		return 0
	}
	return cpu.Seconds() * 1000 / float64(ops)
}

// processCPU is this process's user plus system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineJiffies reads the aggregate "cpu" line of /proc/stat: busy and
// total ticks (idle and iowait count as not busy).
func machineJiffies() (busy, total uint64) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, 0
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 6 || fields[0] != "cpu" {
		return 0, 0
	}
	var idle uint64
	for i, s := range fields[1:] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0
		}
		// Fields: user nice system idle iowait irq softirq steal guest
		// guest_nice; guest time is already counted in user.
		if i >= 8 {
			break
		}
		total += v
		if i == 3 || i == 4 {
			idle += v
		}
	}
	return total - idle, total
}
