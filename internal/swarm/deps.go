package swarm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// Dependencies (Config.Deps): besides one issue per file, the swarm files
// one issue per directory of the tree, blocked by (and the parent of) the
// issues of its entries. The work on a directory is a hash over its
// entries' results, read from their result comments, so a directory worked
// before all its entries were done gives a wrong hash; the root's result
// must equal the tree hash the swarm computes itself from the files.

// DirPrefix starts the description of a directory's issue; the rest is
// the directory's absolute path.
const DirPrefix = "clasp-swarm-dir: "

// Dir is one directory of the tree: Rel is its slash-separated path
// relative to the tree ("." for the root), Abs its absolute path, Entries
// the Rel paths of its files and subdirectories (sorted), and Hash its
// expected result (TreeHash over its entries).
type Dir struct {
	Rel, Abs string
	Entries  []string
	Hash     string
}

// dirTitle is the title of a directory's issue: its path with a trailing
// slash ("./" for the root).
func dirTitle(rel string) string { return rel + "/" }

// entryName is the name an entry has in its directory's hash: the last
// element of its path, without a directory's trailing slash.
func entryName(rel string) string { return path.Base(strings.TrimSuffix(rel, "/")) }

// TreeHash is the result of a directory whose entries have the results
// hashes (by entry name): hex SHA-256 of the lines "name NUL result LF",
// sorted by name. An entry whose result is missing counts as "missing".
func TreeHash(hashes map[string]string) string {
	names := make([]string, 0, len(hashes))
	for n := range hashes {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%s\n", n, hashes[n])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ListDirs returns the directories of files (every directory holding a
// file, directly or below), deepest first, each with its entries and its
// expected hash computed from the files' SHA-256 (root is the tree's
// absolute path).
func ListDirs(root string, files []File) []Dir {
	entries := map[string]map[string]bool{".": {}}
	for _, f := range files {
		child := f.Rel
		for {
			parent := path.Dir(child)
			if entries[parent] == nil {
				entries[parent] = map[string]bool{}
			}
			entries[parent][child] = true
			if parent == "." {
				break
			}
			child = parent
		}
	}
	dirs := make([]Dir, 0, len(entries))
	for rel, es := range entries {
		d := Dir{Rel: rel, Abs: filepath.Join(root, filepath.FromSlash(rel))}
		for e := range es {
			d.Entries = append(d.Entries, e)
		}
		sort.Strings(d.Entries)
		dirs = append(dirs, d)
	}
	sort.Slice(dirs, func(i, j int) bool {
		di, dj := depth(dirs[i].Rel), depth(dirs[j].Rel)
		if di != dj {
			return di > dj
		}
		return dirs[i].Rel < dirs[j].Rel
	})
	results := map[string]string{}
	for _, f := range files {
		results[f.Rel] = f.SHA256
	}
	for i := range dirs { // deepest first: a subdirectory's hash is known before its parent's
		hs := map[string]string{}
		for _, e := range dirs[i].Entries {
			hs[entryName(e)] = results[e]
		}
		dirs[i].Hash = TreeHash(hs)
		results[dirs[i].Rel] = dirs[i].Hash
	}
	return dirs
}

// depth is the number of elements of a relative path ("." has 0).
func depth(rel string) int {
	if rel == "." {
		return 0
	}
	return strings.Count(rel, "/") + 1
}

// depIssues is what fileDeps filed: the issue id of every file and
// directory (by Rel path), the expected result per issue id, the number of
// blocker edges, and the directory issues with their assignee.
type depIssues struct {
	ids      map[string]string
	expected map[string]string
	edges    int
	dirs     map[string]string // issue id → assignee agent id
	root     string            // the root directory's issue id
}

// fileDeps files the issues of a dependency swarm in company co: one per
// directory (todo, assigned round-robin to agentIDs, parent: its
// directory's issue), top-down; one per file (todo, unassigned, parent:
// its directory's issue); then every directory's blockers (its entries'
// issues) in one PATCH each. Every create and PATCH carries an
// Idempotency-Key derived from the company and the path, so a retry after
// a lost answer files nothing twice.
func fileDeps(ctx context.Context, board *client.Client, co *clasp.Company, files []File, dirs []Dir, agentIDs []string) (*depIssues, error) {
	out := &depIssues{ids: map[string]string{}, expected: map[string]string{}, dirs: map[string]string{}}
	var mu sync.Mutex
	key := func(kind, rel string) context.Context {
		k := sha256.Sum256([]byte(co.ID + "\x00" + kind + "\x00" + rel))
		return client.WithIdempotencyKey(ctx, hex.EncodeToString(k[:16]))
	}
	parentOf := func(rel string) string {
		if rel == "." {
			return ""
		}
		mu.Lock()
		defer mu.Unlock()
		return out.ids[path.Dir(rel)]
	}
	// Directories top-down, one depth at a time: a parent exists before
	// its children name it.
	byDepth := map[int][]Dir{}
	maxDepth := 0
	for _, d := range dirs {
		byDepth[depth(d.Rel)] = append(byDepth[depth(d.Rel)], d)
		maxDepth = max(maxDepth, depth(d.Rel))
	}
	n := 0
	for level := 0; level <= maxDepth; level++ {
		level := byDepth[level]
		assignee := make([]string, len(level))
		for i := range level {
			assignee[i] = agentIDs[n%len(agentIDs)]
			n++
		}
		err := parallel(ctx, len(level), func(i int) error {
			d := level[i]
			iss, err := board.IssueCreate(key("dir", d.Rel), co.ID, client.IssueCreateRequest{
				Title: dirTitle(d.Rel), Description: DirPrefix + d.Abs, Status: clasp.IssueTodo,
				AssigneeAgentID: assignee[i], ParentID: parentOf(d.Rel),
			})
			if err != nil {
				return fmt.Errorf("file issue for directory %s: %w", d.Rel, err)
			}
			mu.Lock()
			out.ids[d.Rel], out.expected[iss.ID], out.dirs[iss.ID] = iss.ID, d.Hash, assignee[i]
			if d.Rel == "." {
				out.root = iss.ID
			}
			mu.Unlock()
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	err := parallel(ctx, len(files), func(i int) error {
		f := files[i]
		iss, err := board.IssueCreate(key("file", f.Rel), co.ID, client.IssueCreateRequest{
			Title: f.Rel, Description: f.Abs, Status: clasp.IssueTodo, ParentID: parentOf(f.Rel),
		})
		if err != nil {
			return fmt.Errorf("file issue for %s: %w", f.Rel, err)
		}
		mu.Lock()
		out.ids[f.Rel], out.expected[iss.ID] = iss.ID, f.SHA256
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = parallel(ctx, len(dirs), func(i int) error {
		d := dirs[i]
		blockers := make([]string, len(d.Entries))
		mu.Lock()
		for k, e := range d.Entries {
			blockers[k] = out.ids[e]
		}
		id := out.ids[d.Rel]
		out.edges += len(blockers)
		mu.Unlock()
		if _, err := board.IssueUpdate(key("blockers", d.Rel), id, client.IssueUpdateRequest{BlockedByIssueIDs: &blockers}); err != nil {
			return fmt.Errorf("set the blockers of directory %s: %w", d.Rel, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// parallel calls f(0..n-1) on 8 goroutines and returns the first error
// (ctx's error when it ended before every call was made).
func parallel(ctx context.Context, n int, f func(i int) error) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		next     = make(chan int)
	)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// dirWork is the work on a directory's issue iss: the TreeHash of its
// entries' results, each read from the last result comment of a blocker
// of iss (a blocker without one counts as "missing", which makes the hash
// wrong). slow stretches the work as HashFile does, so that a kill can
// land in the middle.
func dirWork(ctx context.Context, rc *client.Client, iss *clasp.Issue, slow time.Duration) (string, error) {
	blockers := iss.BlockedBy
	if blockers == nil { // an answer without relations: read them
		full, err := rc.IssueGet(ctx, iss.ID)
		if err != nil {
			return "", fmt.Errorf("read the entries of %s: %w", iss.Identifier, err)
		}
		blockers = full.BlockedBy
	}
	hashes := map[string]string{}
	for _, b := range blockers {
		cs, err := allComments(ctx, rc, b.ID)
		if err != nil {
			return "", fmt.Errorf("read the result of %s: %w", b.Identifier, err)
		}
		res := "missing"
		for _, c := range cs {
			if strings.HasPrefix(c.Body, ResultPrefix) {
				res = strings.TrimPrefix(c.Body, ResultPrefix)
			}
		}
		hashes[entryName(b.Title)] = res
		if slow > 0 && !sleepCtx(ctx, slow/time.Duration(max(1, len(blockers)))) {
			return "", ctx.Err()
		}
	}
	return TreeHash(hashes), nil
}

// Names of the dependency checks (Violation.Check).
const (
	CheckDepOrder = "dependency_order" // an issue entered in_progress or done before all its blockers were done
	CheckDepWake  = "dependency_wake"  // a ready state did not wake its agent exactly once
)

// DepTally is what the dependency checks counted.
type DepTally struct {
	Dirs     int    `json:"dirs"`     // directory issues
	Edges    int    `json:"edges"`    // blocker edges
	Wakes    int    `json:"wakes"`    // issue_blockers_resolved wake requests
	RootHash string `json:"rootHash"` // the tree hash the swarm computed itself
}

// wakeDetails are the details of an agent.wake_requested row.
type wakeDetails struct {
	Reason  string  `json:"reason"`
	IssueID *string `json:"issueId"`
}

// checkDeps checks the activity log acts (any order) of a dependency
// swarm against the issues (their final blockers, BlockedBy): no issue
// entered in_progress (issue.checked_out) or done before every one of its
// blockers had its done row (by activity id, the commit order of one
// issue's rows); and every directory issue assigned to an agent (dirs:
// issue id → assignee) got exactly one issue_blockers_resolved wake
// request, recorded after its last blocker was done. It returns the
// number of such wakes.
func checkDeps(acts []*clasp.Activity, issues []*clasp.Issue, dirs map[string]string, add func(issue, check, format string, args ...any)) int {
	sort.Slice(acts, func(i, j int) bool { return acts[i].ID < acts[j].ID })
	doneAt := map[string]int64{}    // issue id → id of its first row setting done
	entered := map[string][]int64{} // issue id → ids of rows entering in_progress or done
	wakes := map[string][]int64{}   // issue id → ids of its issue_blockers_resolved wake rows
	for _, a := range acts {
		switch a.Action {
		case clasp.ActionIssueCheckedOut:
			entered[a.EntityID] = append(entered[a.EntityID], a.ID)
		case clasp.ActionIssueUpdated:
			if _, to, ok := statusChange(a.Details); ok {
				switch to {
				case string(clasp.IssueDone):
					if _, ok := doneAt[a.EntityID]; !ok {
						doneAt[a.EntityID] = a.ID
					}
					entered[a.EntityID] = append(entered[a.EntityID], a.ID)
				case string(clasp.IssueInProgress):
					entered[a.EntityID] = append(entered[a.EntityID], a.ID)
				}
			}
		case clasp.ActionWakeRequested:
			var d wakeDetails
			if json.Unmarshal(a.Details, &d) == nil && d.Reason == clasp.InvocationBlockersResolved && d.IssueID != nil {
				wakes[*d.IssueID] = append(wakes[*d.IssueID], a.ID)
			}
		}
	}
	n := 0
	for _, iss := range issues {
		var lastBlocker int64
		for _, b := range iss.BlockedBy {
			at, ok := doneAt[b.ID]
			if !ok {
				at = 1<<63 - 1
			}
			lastBlocker = max(lastBlocker, at)
			for _, e := range entered[iss.ID] {
				if e < at {
					add(iss.Identifier, CheckDepOrder, "activity row %d entered in_progress or done before its blocker %s was done (row %d)", e, b.Identifier, doneAt[b.ID])
				}
			}
		}
		if _, isDir := dirs[iss.ID]; !isDir {
			continue
		}
		ws := wakes[iss.ID]
		n += len(ws)
		switch {
		case len(ws) != 1:
			add(iss.Identifier, CheckDepWake, "%d issue_blockers_resolved wake requests, want exactly 1 (one ready state)", len(ws))
		case ws[0] < lastBlocker:
			add(iss.Identifier, CheckDepWake, "the wake (row %d) came before its last blocker was done (row %d)", ws[0], lastBlocker)
		}
	}
	return n
}
