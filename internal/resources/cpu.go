package resources

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Meter measures, from Start to Stop, the CPU time of this process, of the
// servers (Postgres and nats-server, from /proc) and of the whole machine.
// A Meter is a value: starting one reads the counters once and holds them.
type Meter struct {
	dbPrefix    string
	start       time.Time
	self        time.Duration
	servers     serverCPU
	busy, total uint64 // machine jiffies from /proc/stat; zero when unreadable
}

// Use is what a Meter saw between its Start and its Stop.
type Use struct {
	Wall time.Duration
	// Self is this process's user+system CPU time: the benchmark's
	// process, with whatever system, supplier and load generator it runs.
	Self time.Duration
	// Postgres is the CPU time of the backends serving the measured
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
func (u Use) Other() time.Duration {
	return max(u.Machine-u.Self-u.Postgres-u.NATS, 0)
}

// Start starts a Meter. The Postgres backends it counts are those
// connected to a database whose name begins with dbPrefix: the benchmark's
// scratch databases, so that other clients of a shared server are left
// out.
func Start(dbPrefix string) Meter {
	busy, total := machineJiffies()
	return Meter{dbPrefix: dbPrefix, start: time.Now(), self: processCPU(), servers: readServerCPU(dbPrefix), busy: busy, total: total}
}

// Stop reads the counters again and returns what was used since Start.
// A Meter may be stopped more than once; each Stop measures from Start.
func (m Meter) Stop() Use {
	servers := readServerCPU(m.dbPrefix)
	u := Use{
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

// server is whose work a process does, as far as the Meter cares.
type server int

const (
	notCounted server = iota
	postgres
	nats
)

// serverOf tells, from a process's /proc/PID/cmdline (arguments separated
// by NULs), whether its CPU time counts as Postgres's, as nats-server's or
// not at all. A Postgres backend retitles itself "postgres: USER DATABASE
// HOST(PORT) STATE", so the database name tells the benchmark's backends
// from other clients'; the server's own processes ("postgres: walwriter",
// the postmaster) count whoever they work for, since the benchmark's
// commits keep them busy.
func serverOf(cmdline, dbPrefix string) server {
	argv0, _, _ := strings.Cut(cmdline, "\x00")
	switch {
	case strings.HasPrefix(cmdline, "postgres: ") && strings.Contains(cmdline, " "+dbPrefix):
		return postgres // a backend of a measured database
	case strings.HasPrefix(cmdline, "postgres: ") && !strings.Contains(cmdline, "("):
		return postgres // walwriter, checkpointer, background writer…
	case strings.HasSuffix(argv0, "/postgres"):
		return postgres // the postmaster, which forks the backends
	case strings.HasSuffix(argv0, "nats-server"):
		return nats
	}
	return notCounted
}

// clockTick is the unit of /proc/PID/stat times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// readServerCPU sums, from /proc, the CPU time of nats-server and of the
// Postgres processes serverOf counts. A backend that exits between two
// readings takes its time with it; a benchmark's connections should live
// through each measured stretch.
func readServerCPU(dbPrefix string) serverCPU {
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
		switch serverOf(string(raw), dbPrefix) {
		case postgres:
			c.postgres += processTicks(pid)
		case nats:
			c.nats += processTicks(pid)
		}
	}
	return c
}

// processTicks reads utime + stime of process pid.
func processTicks(pid string) time.Duration {
	raw, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	return statCPU(string(raw))
}

// statCPU is utime + stime from the text of a /proc/PID/stat. The command
// name, in parentheses, may hold spaces: fields are counted after its
// closing parenthesis (field 3 is the state; 14 and 15 are utime and
// stime).
func statCPU(stat string) time.Duration {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(stat[i+1:])
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
