package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// UIDRange is a range of uids, First to Last inclusive, from which each
// managed agent gets a uid of its own (serve --agent-uid-range), like
// systemd's DynamicUser: its processes run as that uid, with the gid of
// the same number and no supplementary groups, so no agent can read the
// environment (/proc/<pid>/environ: the run token) or files of another,
// nor signal or trace its processes.
type UIDRange struct {
	First, Last uint32
}

// ParseUIDRange parses "FIRST-LAST" (decimal uids, FIRST <= LAST). The
// range must not include root's uid 0.
func ParseUIDRange(s string) (UIDRange, error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return UIDRange{}, fmt.Errorf("%q is not FIRST-LAST (two uids, such as 200000-265535)", s)
	}
	first, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 32)
	last, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 32)
	switch {
	case err1 != nil || err2 != nil:
		return UIDRange{}, fmt.Errorf("%q is not FIRST-LAST with decimal uids below 4294967295", s)
	case first == 0:
		return UIDRange{}, fmt.Errorf("%q includes uid 0 (root)", s)
	case first > last:
		return UIDRange{}, fmt.Errorf("%q: the first uid is above the last", s)
	case last >= 1<<32-1:
		return UIDRange{}, fmt.Errorf("%q includes uid 4294967295, which means no uid", s)
	}
	return UIDRange{First: uint32(first), Last: uint32(last)}, nil
}

// String is FIRST-LAST.
func (r UIDRange) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }

// Setting keys of the uid allocations. An agent's uid is stored per range
// (uidKey), so that a changed range gives it a uid of the new range; the
// owner of a uid (uidOwnerKey) is stored whatever the range, and never
// changes: no two agents ever get the same uid.
func uidKey(r UIDRange, agentID string) string { return "agent_uid:" + r.String() + ":" + agentID }
func uidOwnerKey(uid uint32) string            { return "agent_uid_owner:" + strconv.FormatUint(uint64(uid), 10) }

// agentUID returns agent agentID's uid in Config.AgentUIDs, allocating it
// at the agent's first run (allocate false: only an existing one; ok
// false when there is none).
//
// The allocation is durable and shared through the database, as two
// settings rows written with SettingPutIfAbsent (a conditional insert, in
// both stores): "agent_uid_owner:<uid>" names the agent that owns a uid,
// and "agent_uid:<range>:<agentId>" the agent's uid in that range. A uid
// is the agent's only if the owner row this agent inserted, or found,
// names it; the agent's row is written only after that, and the first one
// written wins. So replicas sharing the database (on one machine or
// several), restarts, and concurrent first runs of one agent all agree on
// one uid per agent, and no uid is ever owned by two agents, also when
// the range is changed. A file under the data directory would not: two
// replicas on one machine may have different data directories. Two
// servers with separate databases on one machine must be given disjoint
// ranges.
//
// The search starts at a point of the range chosen by the agent's id
// (FNV-1a), so the uid does not depend on the order agents first run in;
// it skips uids that name an account or a group of the system (the user
// database: /etc/passwd, /etc/group) and uids already owned. Errors: the
// range is used up, or the store failed.
func (s *Scheduler) agentUID(ctx context.Context, agentID string, allocate bool) (uid uint32, ok bool, err error) {
	r := *s.cfg.AgentUIDs
	s.mu.Lock()
	uid, ok = s.uids[agentID]
	s.mu.Unlock()
	if ok {
		return uid, true, nil
	}
	defer func() {
		if ok {
			s.mu.Lock()
			s.uids[agentID] = uid
			s.mu.Unlock()
		}
	}()
	parse := func(v string) (uint32, error) {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || uint32(n) < r.First || uint32(n) > r.Last {
			return 0, fmt.Errorf("agent %s: stored uid %q is not in %s", agentID, v, r)
		}
		return uint32(n), nil
	}
	v, err := s.st.SettingGet(ctx, uidKey(r, agentID))
	switch {
	case err == nil:
		uid, err := parse(v)
		return uid, err == nil, err
	case clasp.ErrorCode(err) != clasp.CodeNotFound:
		return 0, false, fmt.Errorf("agent uid: %w", err)
	case !allocate:
		return 0, false, nil
	}
	size := uint64(r.Last) - uint64(r.First) + 1
	h := fnv.New64a()
	_, _ = h.Write([]byte(agentID))
	start := h.Sum64() % size
	for i := range size {
		cand := r.First + uint32((start+i)%size) // #nosec G115 -- below size, which is at most Last-First+1
		if systemID(cand) {
			continue
		}
		owner, err := s.st.SettingPutIfAbsent(ctx, uidOwnerKey(cand), agentID)
		if err != nil {
			return 0, false, fmt.Errorf("agent uid: %w", err)
		}
		if owner != agentID {
			continue // another agent's
		}
		got, err := s.st.SettingPutIfAbsent(ctx, uidKey(r, agentID), strconv.FormatUint(uint64(cand), 10))
		if err != nil {
			return 0, false, fmt.Errorf("agent uid: %w", err)
		}
		// got is cand, or the uid a concurrent first run of the agent (on
		// another replica) recorded first; cand then stays this agent's,
		// unused.
		uid, err := parse(got)
		return uid, err == nil, err
	}
	return 0, false, fmt.Errorf("agent uid: every uid of --agent-uid-range %s is taken (by other agents or system accounts): widen the range", r)
}

// systemID reports whether id names an account or a group of the system.
func systemID(id uint32) bool {
	s := strconv.FormatUint(uint64(id), 10)
	if _, err := user.LookupId(s); err == nil {
		return true
	}
	_, err := user.LookupGroupId(s)
	return err == nil
}

// agentHome returns agent agentID's home directory, <HomeDir>/<agentId>,
// made if missing: mode 0700, owned by uid (and gid uid), under a
// directory of mode 0711 (traversable, not listable). A home left owned
// by another uid (the agent's uid of an earlier range) is handed to uid
// with everything in it. It is kept across runs: the agent's files that
// must outlive a run go there.
func (s *Scheduler) agentHome(agentID string, uid uint32) (string, error) {
	// The parent must be traversable by the agents, never listable.
	if err := os.MkdirAll(s.cfg.HomeDir, 0o711); err != nil { // #nosec G301 -- traversable by the agents' uids, not listable
		return "", fmt.Errorf("agent home: %w", err)
	}
	if err := os.Chmod(s.cfg.HomeDir, 0o711); err != nil { // #nosec G302 -- a directory: traversable by the agents' uids, not listable
		return "", fmt.Errorf("agent home: %w", err)
	}
	home := filepath.Join(s.cfg.HomeDir, filepath.Base(agentID))
	if err := os.Mkdir(home, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("agent home: %w", err)
	}
	fi, err := os.Lstat(home)
	if err != nil {
		return "", fmt.Errorf("agent home: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("agent home %s is not a directory", home)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != uid {
		if err := chownTree(home, int(uid)); err != nil {
			return "", fmt.Errorf("agent home: %w", err)
		}
	}
	if err := os.Chmod(home, 0o700); err != nil { // #nosec G302 -- a directory, its owner's only
		return "", fmt.Errorf("agent home: %w", err)
	}
	return home, nil
}

// chownTree gives dir and everything in it to uid (and gid uid), within
// dir only: the walk and the changes go through an os.Root, so a symbolic
// link the previous owner left, or swaps in meanwhile, is never followed.
func chownTree(dir string, uid int) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return fs.WalkDir(root.FS(), ".", func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return root.Lchown(p, uid, uid)
	})
}

// runUser is the account run's process starts as: with Config.AgentUIDs
// the agent's own uid (allocated at its first run) and home; else
// Config.AgentUser (nil: the server's own).
func (s *Scheduler) runUser(ctx context.Context, run *clasp.Run) (*AgentUser, error) {
	if s.cfg.AgentUIDs == nil {
		return s.cfg.AgentUser, nil
	}
	uid, _, err := s.agentUID(ctx, run.AgentID, true)
	if err != nil {
		return nil, err
	}
	home, err := s.agentHome(run.AgentID, uid)
	if err != nil {
		return nil, err
	}
	return &AgentUser{Name: "uid " + strconv.FormatUint(uint64(uid), 10), Uid: uid, Gid: uid, Home: home}, nil
}

// endStrays is the backstop of a run whose process (the shim) is gone,
// called once the run has ended: it SIGKILLs what a shim that was itself
// killed left behind, among the processes of the run's uid (the agent's
// own uid, Config.AgentUser, or the server's). First every such process
// whose environment names the run (CLASP_RUN_ID, inherited by every
// descendant that did not clear it). Then, with per-agent uids
// (Config.AgentUIDs) and when the agent has no running run any more (on
// any server), every process of its uid that started before that check:
// none can be of another run, so this catches those that cleared their
// environment too. A process started after the check (a run that started
// meanwhile) is never touched; the passes repeat until one finds nothing
// to kill, so a process forked during a pass is found by the next. A
// process that changed its uid (a setuid program) is not found.
func (s *Scheduler) endStrays(ctx context.Context, run *clasp.Run) {
	uid := uint32(os.Geteuid()) // #nosec G115 -- a uid fits in 32 bits
	switch {
	case s.cfg.AgentUIDs != nil:
		u, ok, err := s.agentUID(ctx, run.AgentID, false)
		if err != nil || !ok {
			return // never ran with a uid of its own
		}
		uid = u
	case s.cfg.AgentUser != nil:
		uid = s.cfg.AgentUser.Uid
	}
	killed := 0
	for range 100 {
		n := 0
		for _, pid := range uidProcs(uid, 1<<62) {
			if pid != os.Getpid() && procRunID(pid) == run.ID && syscall.Kill(pid, syscall.SIGKILL) == nil {
				n++
			}
		}
		if s.cfg.AgentUIDs != nil {
			before := bootTicks()
			live, _, err := s.st.RunList(ctx, &store.RunListParams{CompanyID: run.CompanyID, AgentID: run.AgentID,
				Statuses: []clasp.RunStatus{clasp.RunRunning}, Page: store.Page{Limit: 1}})
			if err == nil && len(live) == 0 {
				for _, pid := range uidProcs(uid, before) {
					if syscall.Kill(pid, syscall.SIGKILL) == nil {
						n++
					}
				}
			}
		}
		killed += n
		if n == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond) // the killed processes exit; their children re-parent
	}
	if killed > 0 {
		s.log.Warn("heartbeat: killed processes that outlived their run", "run", run.ID, "agent", run.AgentID,
			"uid", uid, "signalled", killed)
	}
}

// procRunID is the CLASP_RUN_ID in process pid's environment ("" if none,
// or unreadable).
func procRunID(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return ""
	}
	for kv := range strings.SplitSeq(string(b), "\x00") {
		if v, ok := strings.CutPrefix(kv, "CLASP_RUN_ID="); ok {
			return v
		}
	}
	return ""
}
