package swarm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/clasp-dev/clasp"
)

// TestListDirsHashesTheTree: every directory holding a file gets an issue's
// worth of entries, deepest first, and its hash is TreeHash over its
// entries' results, a subdirectory's being its own hash; changing one
// file's hash changes every directory above it and no other.
func TestListDirsHashesTheTree(t *testing.T) {
	files := []File{{Rel: "a/b/y", SHA256: "hy"}, {Rel: "a/x", SHA256: "hx"}, {Rel: "c/w", SHA256: "hw"}, {Rel: "z", SHA256: "hz"}}
	dirs := ListDirs("/t", files)
	var rels []string
	byRel := map[string]Dir{}
	for _, d := range dirs {
		rels = append(rels, d.Rel)
		byRel[d.Rel] = d
	}
	if got := strings.Join(rels, " "); got != "a/b a c ." {
		t.Fatalf("dirs %q, want deepest first: a/b a c .", got)
	}
	if got := strings.Join(byRel["a"].Entries, " "); got != "a/b a/x" {
		t.Errorf("entries of a: %q", got)
	}
	ab := TreeHash(map[string]string{"y": "hy"})
	a := TreeHash(map[string]string{"b": ab, "x": "hx"})
	c := TreeHash(map[string]string{"w": "hw"})
	root := TreeHash(map[string]string{"a": a, "c": c, "z": "hz"})
	for rel, want := range map[string]string{"a/b": ab, "a": a, "c": c, ".": root} {
		if byRel[rel].Hash != want {
			t.Errorf("hash of %s: %s, want %s", rel, byRel[rel].Hash, want)
		}
	}
	if byRel["."].Abs != "/t" || byRel["a/b"].Abs != "/t/a/b" {
		t.Errorf("abs paths: %q %q", byRel["."].Abs, byRel["a/b"].Abs)
	}
	files[0].SHA256 = "other"
	again := map[string]string{}
	for _, d := range ListDirs("/t", files) {
		again[d.Rel] = d.Hash
	}
	for rel, changed := range map[string]bool{"a/b": true, "a": true, ".": true, "c": false} {
		if (again[rel] != byRel[rel].Hash) != changed {
			t.Errorf("%s: changed %v, want %v", rel, again[rel] != byRel[rel].Hash, changed)
		}
	}
	if TreeHash(map[string]string{"y": "missing"}) == ab {
		t.Error("a missing entry result gives the same hash")
	}
}

// TestCheckDepsFindsEarlyWorkAndWrongWakes: a checkout or a done of an
// issue before its blocker's done row is a dependency_order violation; a
// directory with no wake, two wakes, or a wake before its blocker was done
// is a dependency_wake violation; the right order and one wake pass.
func TestCheckDepsFindsEarlyWorkAndWrongWakes(t *testing.T) {
	blocker := &clasp.Issue{ID: "b", Identifier: "SW-1"}
	dir := &clasp.Issue{ID: "d", Identifier: "SW-2", BlockedBy: []clasp.IssueSummary{{ID: "b", Identifier: "SW-1"}}}
	issues := []*clasp.Issue{blocker, dir}
	done := func(id int64, entity string) *clasp.Activity {
		return &clasp.Activity{ID: id, Action: clasp.ActionIssueUpdated, EntityID: entity,
			Details: json.RawMessage(`{"changes":{"status":{"from":"in_progress","to":"done"}}}`)}
	}
	checkedOut := func(id int64, entity string) *clasp.Activity {
		return &clasp.Activity{ID: id, Action: clasp.ActionIssueCheckedOut, EntityID: entity, Details: json.RawMessage(`{}`)}
	}
	wake := func(id int64, issue string) *clasp.Activity {
		return &clasp.Activity{ID: id, Action: clasp.ActionWakeRequested, EntityID: "agent",
			Details: json.RawMessage(`{"reason":"issue_blockers_resolved","issueId":"` + issue + `"}`)}
	}
	for _, tc := range []struct {
		name string
		acts []*clasp.Activity
		want []string // the checks that must fail, in order
	}{
		{"in order", []*clasp.Activity{checkedOut(1, "b"), done(2, "b"), wake(3, "d"), checkedOut(4, "d"), done(5, "d")}, nil},
		{"checked out early", []*clasp.Activity{checkedOut(1, "b"), checkedOut(2, "d"), done(3, "b"), wake(4, "d"), done(5, "d")}, []string{CheckDepOrder}},
		{"done early", []*clasp.Activity{checkedOut(1, "b"), done(2, "d"), done(3, "b"), wake(4, "d")}, []string{CheckDepOrder}},
		{"blocker never done", []*clasp.Activity{checkedOut(4, "d"), wake(5, "d")}, []string{CheckDepOrder, CheckDepWake}},
		{"no wake", []*clasp.Activity{done(2, "b"), checkedOut(4, "d")}, []string{CheckDepWake}},
		{"two wakes", []*clasp.Activity{done(2, "b"), wake(3, "d"), wake(6, "d")}, []string{CheckDepWake}},
		{"wake too early", []*clasp.Activity{wake(1, "d"), done(2, "b")}, []string{CheckDepWake}},
	} {
		var got []string
		checkDeps(tc.acts, issues, map[string]string{"d": "agent"}, func(issue, check, format string, args ...any) {
			got = append(got, check)
		})
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: violations %v, want %v", tc.name, got, tc.want)
		}
	}
}
