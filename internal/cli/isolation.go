package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/clasp-dev/clasp/internal/heartbeat"
)

// RunWorkDirName is the directory under the data directory holding the
// working directories of managed runs (<data-dir>/runs/<runId>).
const RunWorkDirName = "runs"

// AgentHomeDirName is the directory under the data directory holding the
// home directories of agents with uids of their own
// (<data-dir>/homes/<agentId>, serve --agent-uid-range).
const AgentHomeDirName = "homes"

// agentUIDRange checks serve --agent-uid-range FIRST-LAST (with
// --agent-user agentUser, "" if not given). Errors (usage): not
// FIRST-LAST, a range with uid 0 or the server's own uid, given with
// --agent-user, or the server is not root (only root may start processes
// as other uids and kill them).
func agentUIDRange(s, agentUser string) (*heartbeat.UIDRange, error) {
	r, err := heartbeat.ParseUIDRange(s)
	if err != nil {
		return nil, usageErr(fmt.Errorf("--agent-uid-range %w", err))
	}
	euid := uint64(os.Geteuid()) // #nosec G115 -- a uid is not negative
	switch {
	case agentUser != "":
		return nil, usageErr(fmt.Errorf("--agent-uid-range and --agent-user exclude each other: the range gives every agent a uid of its own, --agent-user one uid for all; keep --agent-uid-range"))
	case euid != 0:
		return nil, usageErr(fmt.Errorf("--agent-uid-range needs the server to run as root (it starts each agent's processes as a uid of that agent, and kills them by uid); this server runs as uid %d", euid))
	case uint64(r.First) <= euid && euid <= uint64(r.Last):
		return nil, usageErr(fmt.Errorf("--agent-uid-range %s includes the server's own uid %d", s, euid))
	}
	return &r, nil
}

// lookupAgentUser resolves serve --agent-user NAME (a user name or a
// numeric uid) to the account managed agents run as. Errors (usage): no
// such user; the server is not root (only root may start processes as
// another uid); the user is the server's own uid or root (no isolation).
func lookupAgentUser(name string) (*heartbeat.AgentUser, error) {
	u, err := user.Lookup(name)
	if err != nil {
		if _, nerr := strconv.Atoi(name); nerr == nil {
			u, err = user.LookupId(name)
		}
	}
	if err != nil {
		return nil, usageErr(fmt.Errorf("--agent-user %q: %w", name, err))
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, usageErr(fmt.Errorf("--agent-user %q: uid %q, gid %q: %w", name, u.Uid, u.Gid, err))
	}
	switch {
	case uid == 0:
		return nil, usageErr(fmt.Errorf("--agent-user %q is root: agents must run as an unprivileged user", name))
	case int(uid) == os.Geteuid():
		return nil, usageErr(fmt.Errorf("--agent-user %q is the server's own user: agents could read its data directory; use another account", name))
	case os.Geteuid() != 0:
		return nil, usageErr(fmt.Errorf("--agent-user needs the server to run as root (it starts agent processes as %q and keeps signalling their process groups)", name))
	}
	return &heartbeat.AgentUser{Name: u.Username, Uid: uint32(uid), Gid: uint32(gid), Home: u.HomeDir}, nil
}

// secureDataDir sets the modes that keep agents out of the data
// directory: the directory 0700, or 0711 when agents run as other users
// (--agent-user or --agent-uid-range: they must traverse it to reach
// <data-dir>/runs/<runId> and <data-dir>/homes/<agentId>, never list it); the
// SQLite database and its -wal and -shm files and the board token file
// 0600 (absent files are skipped). It returns the first error.
func secureDataDir(dataDir, dbPath, boardTokenFile string, agentUser bool) error {
	mode := os.FileMode(0o700)
	if agentUser {
		mode = 0o711
	}
	if err := os.Chmod(dataDir, mode); err != nil {
		return fmt.Errorf("data directory mode: %w", err)
	}
	for _, p := range []string{dbPath, dbPath + "-wal", dbPath + "-shm", boardTokenFile} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("mode of %s: %w", filepath.Base(p), err)
		}
	}
	return nil
}

// loopbackHostOnly serves h only to requests whose Host names the local
// machine (localhost, 127.0.0.1, [::1], with any port): a web page that
// rebinds its own name to 127.0.0.1 (DNS rebinding) sends its own Host and
// gets 403, so a browser cannot read the profiler (whose /cmdline shows
// the server's argv).
func loopbackHostOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if hh, _, err := net.SplitHostPort(host); err == nil {
			host = hh
		}
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		if !isLoopbackHost(host) {
			http.Error(w, "forbidden: the profiler answers only requests addressed to a loopback name (localhost, 127.0.0.1, [::1])", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
