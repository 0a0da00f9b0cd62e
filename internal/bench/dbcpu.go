package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux ABI Go supports).
const clockTick = 10 * time.Millisecond

// backendCPU measures the CPU time of the PostgreSQL backends serving one
// bench target: the backends whose application_name is app, found in
// pg_stat_activity through a monitor connection of the bench's own, their
// user + system time read from /proc/<pid>/stat. It needs the database on
// this machine, in the same process namespace; where a backend's pid has
// no /proc entry of a postgres process, the probe is off (ok false) and
// the rows show no database CPU. Background processes (WAL writer,
// checkpointer, autovacuum) are not counted: only the work the target's
// statements cost in their own backends, commit flushes included.
type backendCPU struct {
	mon *pgMonitor
	app string
}

// pgMonitor is the bench's own connection to the database, shared by the
// probes of a run (they sample one at a time, between slices).
type pgMonitor struct {
	mu   sync.Mutex
	conn *pgx.Conn
	off  bool // a backend's /proc entry was missing: the probes report nothing
}

// newPGMonitor connects to the database at dsn for backendCPU probes.
func newPGMonitor(ctx context.Context, dsn string) (*pgMonitor, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("bench: monitor connection: %w", err)
	}
	return &pgMonitor{conn: conn}, nil
}

func (m *pgMonitor) close() {
	if m != nil && m.conn != nil {
		_ = m.conn.Close(context.Background())
	}
}

// probe returns the probe of the backends named app (nil when m is nil).
func (m *pgMonitor) probe(app string) *backendCPU {
	if m == nil {
		return nil
	}
	return &backendCPU{mon: m, app: app}
}

// sample returns the CPU time so far of each backend of b, by pid; ok is
// false when the backends' CPU cannot be read here.
func (b *backendCPU) sample() (map[int32]time.Duration, bool) {
	m := b.mon
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.off {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := m.conn.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", b.app)
	if err != nil {
		m.off = true
		return nil, false
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		m.off = true
		return nil, false
	}
	out := make(map[int32]time.Duration, len(pids))
	for _, pid := range pids {
		d, ok := procCPU(pid)
		if !ok {
			m.off = true
			return nil, false
		}
		out[pid] = d
	}
	return out, true
}

// since is the CPU the backends of b spent from sample start to now; a
// backend absent from start counts whole (it connected in between).
func (b *backendCPU) since(start map[int32]time.Duration) (time.Duration, bool) {
	cur, ok := b.sample()
	if !ok || start == nil {
		return 0, false
	}
	var d time.Duration
	for pid, c := range cur {
		d += c - start[pid]
	}
	return d, true
}

// procCPU returns utime + stime of process pid from /proc/<pid>/stat, if
// it is a postgres process.
func procCPU(pid int32) (time.Duration, bool) {
	p := "/proc/" + strconv.Itoa(int(pid))
	comm, err := os.ReadFile(p + "/comm") // #nosec G304 -- /proc/<pid>/comm, pid an integer
	if err != nil || !bytes.HasPrefix(comm, []byte("postgres")) {
		return 0, false
	}
	stat, err := os.ReadFile(p + "/stat") // #nosec G304 -- /proc/<pid>/stat, pid an integer
	if err != nil {
		return 0, false
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// the fields after the last ")" start at field 3 (state).
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	st, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * clockTick, true
}

// withAppName returns the connection string dsn (a postgres:// URL or a
// key=value string) with application_name set to app.
func withAppName(dsn, app string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("application_name", app)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " application_name=" + app
}
