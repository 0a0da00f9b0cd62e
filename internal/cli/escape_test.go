package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/clasp-dev/clasp"
)

func TestEscapeText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, cell, text string }{
		{"plain ÄÖ 🚀 ビルダー", "plain ÄÖ 🚀 ビルダー", "plain ÄÖ 🚀 ビルダー"},
		{"a\x1b[2Jb", `a\x1b[2Jb`, `a\x1b[2Jb`},
		{"row\nfake\trow", `row\nfake\trow`, "row\nfake\trow"},
		{"cr\rover", `cr\rover`, `cr\rover`},
		{"c1\u009b31m", `c1\x9b31m`, `c1\x9b31m`},
		{"del\x7f", `del\x7f`, `del\x7f`},
		{"bidi\u202egnp.exe", `bidi\u202egnp.exe`, `bidi\u202egnp.exe`},
		{"bad\xffutf8", `bad\xffutf8`, `bad\xffutf8`},
		{"zwj 👩\u200d💻", "zwj 👩\u200d💻", "zwj 👩\u200d💻"}, // a joiner is not a control
	} {
		if got := cell(tc.in); got != tc.cell {
			t.Errorf("cell(%q) = %q, want %q", tc.in, got, tc.cell)
		}
		if got := escapeText(tc.in, true); got != tc.text {
			t.Errorf("escapeText(%q, keep lines) = %q, want %q", tc.in, got, tc.text)
		}
	}
}

// TestHumanOutputEscapesControlCharacters: a name or title holding escape
// sequences and newlines reaches the operator's terminal as visible
// escapes, one row per record; a description keeps its lines; --json
// keeps the text as written.
func TestHumanOutputEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	info, _, _ := startServer(t, filepath.Join(t.TempDir(), "data"))
	board := map[string]string{EnvURL: info.URL, EnvToken: info.BoardToken}
	if r := runCLI(t, board, "", "company", "create", "Acme", "--prefix", "ACME"); r.code != 0 {
		t.Fatalf("company create: exit %d: %s", r.code, r.stderr)
	}
	const agentName = "evil\x1b[2J\nname"
	const title = "bad\x1b[31mtitle\nfake row"
	if r := runCLI(t, board, "", "agent", "create", agentName, "--company", "ACME"); r.code != 0 {
		t.Fatalf("agent create: exit %d: %s", r.code, r.stderr)
	}
	var iss clasp.Issue
	mustJSON(t, runCLI(t, board, "", "issue", "create", title, "--company", "ACME", "--assignee", agentName,
		"--description", "line one\nline two\x1b[0m", "--json"), &iss)
	if iss.Title != title {
		t.Errorf("--json title = %q, want %q as written", iss.Title, title)
	}

	for _, args := range [][]string{
		{"issue", "list", "--company", "ACME"},
		{"agent", "list", "--company", "ACME"},
		{"activity", "--company", "ACME"},
		{"issue", "show", "ACME-1"},
	} {
		r := runCLI(t, board, "", args...)
		if r.code != 0 {
			t.Fatalf("clasp %v: exit %d: %s", args, r.code, r.stderr)
		}
		if strings.ContainsRune(r.stdout, 0x1b) {
			t.Errorf("clasp %v sends an escape character to the terminal:\n%q", args, r.stdout)
		}
		if strings.Contains(r.stdout, "\nfake row") || strings.Contains(r.stdout, "\nname") {
			t.Errorf("clasp %v breaks a name or title onto a line of its own:\n%s", args, r.stdout)
		}
	}
	out := runCLI(t, board, "", "issue", "list", "--company", "ACME").stdout
	if n := strings.Count(out, "\n"); n != 2 {
		t.Errorf("issue list has %d lines, want a header and one row:\n%s", n, out)
	}
	if !strings.Contains(out, `bad\x1b[31mtitle\nfake row`) || !strings.Contains(out, `evil\x1b[2J\nname`) {
		t.Errorf("issue list does not show the title and assignee escaped:\n%s", out)
	}
	show := runCLI(t, board, "", "issue", "show", "ACME-1").stdout
	if !strings.Contains(show, "line one\nline two\\x1b[0m") {
		t.Errorf("issue show does not keep the description's lines, escaped:\n%s", show)
	}

	r := runCLI(t, board, "", "agent", "show", "no\x1b[2Jbody", "--company", "ACME")
	if r.code == 0 || strings.ContainsRune(r.stderr, 0x1b) {
		t.Errorf("agent show of an unknown name with an escape: exit %d, stderr %q; want an error without the escape", r.code, r.stderr)
	}
}

// TestTableAlignsWideCharacters: a column after names in CJK script or
// with emoji starts at the same terminal column on every row (a wide
// character takes two columns), and ASCII tables keep tabwriter's layout.
func TestTableAlignsWideCharacters(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	tb := newTable(&b, "NAME", "STATUS")
	tb.row("ビルダー", "active")
	tb.row("émile 🚀", "paused")
	tb.row("ab", "x\ty")
	tb.flush()
	want := "NAME      STATUS\n" +
		"ビルダー  active\n" +
		"émile 🚀  paused\n" +
		"ab        x\\ty\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	fields(&b, "ID", "1", "Last heartbeat", "-")
	if want := "ID:              1\nLast heartbeat:  -\n"; b.String() != want {
		t.Errorf("fields:\n%q\nwant:\n%q", b.String(), want)
	}
}
