package sqlfile

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestParseBlocks(t *testing.T) {
	text := `-- The company statements.

-- name: CompanyGet
-- one company by id
SELECT id FROM companies WHERE id = :id;

-- name: CompanyInsert

INSERT INTO companies (id) VALUES (:id)
	-- L1: a tag inside the statement stays
	RETURNING id


`
	got, frags, err := Parse("company.sql", text)
	if err != nil {
		t.Fatal(err)
	}
	want := []Statement{
		{Name: "CompanyGet", File: "company.sql", Line: 3, Doc: "one company by id", SQL: "SELECT id FROM companies WHERE id = :id", sqlLine: 5},
		{Name: "CompanyInsert", File: "company.sql", Line: 7, SQL: "INSERT INTO companies (id) VALUES (:id)\n\t-- L1: a tag inside the statement stays\n\tRETURNING id", sqlLine: 9},
	}
	if len(frags) != 0 {
		t.Errorf("fragments: %+v, want none", frags)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d statements, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("statement %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"empty name", "-- name:\nSELECT 1", `f.sql:1: statement name ""`},
		{"bad name", "-- name: select one\nSELECT 1", `f.sql:1: statement name "select one"`},
		{"empty statement", "-- name: A\n-- only a comment\n\n-- name: B\nSELECT 1", "f.sql:1: statement A is empty"},
		{"empty last statement", "-- name: A\nSELECT 1\n-- name: B\n", "f.sql:3: statement B is empty"},
		{"SQL before the first block", "SELECT 1\n-- name: A\nSELECT 2", `f.sql:1: SQL before the first "-- name:" or "-- fragment:" line`},
		{"empty fragment", "-- fragment: f(r)\n-- only a comment\n-- name: A\nSELECT 1", "f.sql:1: fragment f is empty"},
		{"fragment name not lower case", "-- fragment: Live(r)\nr.a", `f.sql:1: fragment "Live(r)": want a lower-case name`},
		{"fragment with no parentheses", "-- fragment: live r\nr.a", `f.sql:1: fragment "live r": want a lower-case name`},
		{"fragment parameter not a name", "-- fragment: live(r.x)\nr.a", `f.sql:1: fragment live: parameter "r.x"`},
		{"fragment parameter twice", "-- fragment: live(r, r)\nr.a", "f.sql:1: fragment live: parameter r is named twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Parse("f.sql", tc.text)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	fsys := fstest.MapFS{
		"sql/b.sql":   {Data: []byte("-- name: B\nSELECT 2\n")},
		"sql/a.sql":   {Data: []byte("-- name: A\nSELECT 1\n-- name: C\nSELECT 3\n")},
		"sql/x.txt":   {Data: []byte("-- name: X\nSELECT 4\n")},
		"other/d.sql": {Data: []byte("-- name: D\nSELECT 5\n")},
	}
	set, err := Load(fsys, "sql/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(set.Names(), ","); got != "A,B,C" {
		t.Errorf("Names() = %s, want A,B,C", got)
	}
	if got := set.SQL("B"); got != "SELECT 2" {
		t.Errorf("SQL(B) = %q", got)
	}
	if st, ok := set.Get("C"); !ok || st.File != "a.sql" || st.Line != 3 {
		t.Errorf("Get(C) = %+v, %v", st, ok)
	}
	if _, ok := set.Get("X"); ok {
		t.Error("Get(X): a file outside the pattern was read")
	}
}

func TestLoadErrors(t *testing.T) {
	dup := fstest.MapFS{
		"sql/a.sql": {Data: []byte("-- name: A\nSELECT 1\n")},
		"sql/b.sql": {Data: []byte("-- name: A\nSELECT 2\n")},
	}
	if _, err := Load(dup, "sql/*.sql"); err == nil || !strings.Contains(err.Error(), "b.sql:1: statement A is defined again (first at a.sql:1)") {
		t.Errorf("duplicate across files: %v", err)
	}
	same := fstest.MapFS{"sql/a.sql": {Data: []byte("-- name: A\nSELECT 1\n-- name: A\nSELECT 2\n")}}
	if _, err := Load(same, "sql/*.sql"); err == nil || !strings.Contains(err.Error(), "a.sql:3: statement A is defined again (first at a.sql:1)") {
		t.Errorf("duplicate in one file: %v", err)
	}
	if _, err := Load(fstest.MapFS{}, "sql/*.sql"); err == nil || !strings.Contains(err.Error(), "no file matches") {
		t.Errorf("no files: %v", err)
	}
}

func TestIsSelect(t *testing.T) {
	for text, want := range map[string]bool{
		"-- a comment\n\n  select 1": true,
		"SELECT 1":                   true,
		"-- SELECT in a comment\nUPDATE t SET a=1": false,
		"WITH x AS (SELECT 1) UPDATE t SET a=1":    false,
		"-- only a comment":                        false,
	} {
		if got := IsSelect(text); got != want {
			t.Errorf("IsSelect(%q) = %v, want %v", text, got, want)
		}
	}
}

// TestDerive: a derived statement is its source with the one occurrence
// replaced, listed among the names; a source missing, a name taken, or
// the text to replace found other than once is an error that adds nothing.
func TestDerive(t *testing.T) {
	fsys := fstest.MapFS{"sql/a.sql": {Data: []byte("-- name: A\nSELECT x FROM t WHERE id = @id\n-- name: B\nSELECT 1 WHERE a = 1 OR a = 1\n")}}
	set, err := Load(fsys, "sql/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Derive("AByName", "A", "WHERE id = @id", "WHERE name = @name", "A by name."); err != nil {
		t.Fatalf("Derive: %v", err)
	}
	if st, ok := set.Get("AByName"); !ok || st.SQL != "SELECT x FROM t WHERE name = @name" || st.Doc != "A by name." {
		t.Errorf("derived statement: %+v, %v", st, ok)
	}
	if got := strings.Join(set.Names(), ","); got != "A,AByName,B" {
		t.Errorf("Names after Derive = %s, want A,AByName,B", got)
	}
	for _, c := range []struct{ name, from, old, want string }{
		{"C", "Z", "x", "no statement Z"},
		{"B", "A", "x", "already defined"},
		{"C", "A", "nowhere", "occurs 0 times"},
		{"C", "B", "a = 1", "occurs 2 times"},
	} {
		if err := set.Derive(c.name, c.from, c.old, "y", ""); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Derive(%s from %s, %q): %v, want an error saying %q", c.name, c.from, c.old, err, c.want)
		}
	}
	if _, ok := set.Get("C"); ok || len(set.Names()) != 3 {
		t.Errorf("a failed Derive added a statement: %v", set.Names())
	}
}

// TestCut: a cut statement is its source without its marked regions,
// listed among the names; a source missing, a name taken, no region, or a
// marker out of place is an error that adds nothing.
func TestCut(t *testing.T) {
	fsys := fstest.MapFS{"sql/a.sql": {Data: []byte("-- name: A\nSELECT a,\n  -- [opt\n  b,\n  -- ]\n  c FROM t\n  -- [opt\n  JOIN u\n  -- ]\n" +
		"-- name: B\nSELECT 1\n-- [opt\n-- name: C\nSELECT 1\n-- ]\n-- name: D\nSELECT 1\n-- [opt\n-- [opt\n-- ]\n")}}
	set, err := Load(fsys, "sql/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Cut("APlain", "A", "-- [opt", "-- ]", "A without its options."); err != nil {
		t.Fatalf("Cut: %v", err)
	}
	if st, ok := set.Get("APlain"); !ok || st.SQL != "SELECT a,\n  c FROM t" || st.Doc != "A without its options." {
		t.Errorf("cut statement: %+v, %v", st, ok)
	}
	if st, _ := set.Get("A"); !strings.Contains(st.SQL, "b,") {
		t.Errorf("Cut changed its source: %q", st.SQL)
	}
	if got := strings.Join(set.Names(), ","); got != "A,APlain,B,C,D" {
		t.Errorf("Names after Cut = %s, want A,APlain,B,C,D", got)
	}
	for _, c := range []struct{ name, from, want string }{
		{"E", "Z", "no statement Z"},
		{"B", "A", "already defined"},
		{"E", "APlain", "no region"},
		{"E", "B", "has no"},
		{"E", "C", "does not allow"},
		{"E", "D", "does not allow"},
	} {
		if err := set.Cut(c.name, c.from, "-- [opt", "-- ]", ""); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Cut(%s from %s): %v, want an error saying %q", c.name, c.from, err, c.want)
		}
	}
	if _, ok := set.Get("E"); ok || len(set.Names()) != 5 {
		t.Errorf("a failed Cut added a statement: %v", set.Names())
	}
}

// fragmentFile defines the fragments the fragment tests use: one using
// another, one of several lines, one of two parameters.
const fragmentFile = `-- The shared fragments.

-- fragment: leased(r)
-- a running run whose lease has not expired
r.status = 'running' AND r.lease_expires_at > :now

-- fragment: live(r)
r.status = 'queued' OR ({{leased r}})

-- fragment: state(r)
CASE
	WHEN {{live r}} THEN 'live'
	WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END

-- fragment: pair(a, b)
a.x = b.x
`

// TestParseFragments: a fragment block gives its name, parameters, line,
// doc and text as written, and a statement block ends it.
func TestParseFragments(t *testing.T) {
	stmts, frags, err := Parse("f.sql", fragmentFile+"-- name: A\nSELECT {{one}}\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(stmts) != 1 || stmts[0].SQL != "SELECT {{one}}" {
		t.Errorf("statements: %+v", stmts)
	}
	if len(frags) != 4 {
		t.Fatalf("got %d fragments, want 4: %+v", len(frags), frags)
	}
	f := frags[0]
	if f.Name != "leased" || strings.Join(f.Params, ",") != "r" || f.File != "f.sql" || f.Line != 3 ||
		f.Doc != "a running run whose lease has not expired" || f.SQL != "r.status = 'running' AND r.lease_expires_at > :now" || f.sqlLine != 5 {
		t.Errorf("fragment leased: %+v", f)
	}
	if f := frags[1]; f.SQL != "r.status = 'queued' OR ({{leased r}})" {
		t.Errorf("fragment live, as written: %q", f.SQL)
	}
	if f := frags[2]; f.SQL != "CASE\n\tWHEN {{live r}} THEN 'live'\n\tWHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END" {
		t.Errorf("fragment state: %q", f.SQL)
	}
	if f := frags[3]; f.Name != "pair" || strings.Join(f.Params, ",") != "a,b" || f.SQL != "a.x = b.x" {
		t.Errorf("fragment pair: %+v", f)
	}
	if _, frags, err := Parse("f.sql", "-- fragment: now()\nnow()\n"); err != nil || len(frags) != 1 || len(frags[0].Params) != 0 {
		t.Errorf("a fragment of no parameters: %+v, %v", frags, err)
	}
}

// TestLoadFragments: Load expands each use, in statements and in the
// fragments defined after the one used, replacing the parameters by the
// arguments (all at once, "-" dropping the alias) and indenting a
// fragment's later lines as the line of the use; Derive works on the
// expanded text.
func TestLoadFragments(t *testing.T) {
	fsys := fstest.MapFS{
		"sql/a.sql": {Data: []byte("-- name: A\nSELECT 1 FROM runs r WHERE ({{live r}})\n" +
			"-- name: B\n-- a doc line, and a blank line before the text\n\nSELECT\n\tcoalesce((SELECT {{state c}} FROM runs c), 'missing')\n" +
			"-- name: C\nUPDATE runs SET x = 1 WHERE {{leased -}};\n" +
			"-- name: D\nSELECT 1 FROM t a2, u b WHERE {{pair a2 b}} AND {{ pair  b a2 }}\n")},
		"sql/fragments.sql": {Data: []byte(fragmentFile)},
	}
	set, err := Load(fsys, "sql/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"A": "SELECT 1 FROM runs r WHERE (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))",
		"B": "SELECT\n\tcoalesce((SELECT CASE\n" +
			"\t\tWHEN c.status = 'queued' OR (c.status = 'running' AND c.lease_expires_at > :now) THEN 'live'\n" +
			"\t\tWHEN c.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs c), 'missing')",
		"C": "UPDATE runs SET x = 1 WHERE status = 'running' AND lease_expires_at > :now",
		"D": "SELECT 1 FROM t a2, u b WHERE a2.x = b.x AND b.x = a2.x",
	} {
		if got := set.SQL(name); got != want {
			t.Errorf("statement %s:\n got %q\nwant %q", name, got, want)
		}
	}
	if got := strings.Join(set.Names(), ","); got != "A,B,C,D" {
		t.Errorf("Names() = %s, want A,B,C,D (fragments are no statements)", got)
	}
	if err := set.Derive("AQueued", "A", "r.status = 'queued' OR ", "", ""); err != nil {
		t.Fatalf("Derive on expanded text: %v", err)
	}
	if got := set.SQL("AQueued"); got != "SELECT 1 FROM runs r WHERE ((r.status = 'running' AND r.lease_expires_at > :now))" {
		t.Errorf("derived statement: %q", got)
	}
}

// TestLoadFragmentErrors: a use that cannot be expanded fails naming the
// file and line of the use; a fragment defined twice names both places;
// a fragment nothing uses names its definition.
func TestLoadFragmentErrors(t *testing.T) {
	const frag = "-- fragment: live(r)\nr.status = 'queued' OR r.lease > 0\n"
	for _, tc := range []struct{ name, a, b, want string }{
		{"undefined", "-- name: A\n-- doc\n\nSELECT 1,\n\t{{nope r}}\n", frag + "-- name: B\nSELECT {{live r}}\n",
			"a.sql:5: fragment nope is not defined"},
		{"too many arguments", "-- name: A\nSELECT\n  {{live r c}}\n", frag,
			"a.sql:3: fragment live(r): 2 arguments given, want 1"},
		{"no argument", "-- name: A\nSELECT {{live}}\n", frag,
			"a.sql:2: fragment live(r): 0 arguments given, want 1"},
		{"argument not a name", "-- name: A\nSELECT {{live r.x}}\n", frag,
			`a.sql:2: fragment live: argument "r.x"`},
		{"no alias for a parameter used alone", "-- name: A\nSELECT {{f -}}\n", "-- fragment: f(r)\nr.a = r\n",
			"a.sql:2: fragment f: argument - for parameter r"},
		{"unclosed use", "-- name: A\nSELECT {{live r}} + {{live r\n", frag,
			`a.sql:2: a "{{" with no "}}" after it`},
		{"empty use", "-- name: A\nSELECT {{ }}\n", frag,
			"a.sql:2: a fragment use {{}} names no fragment"},
		{"defined twice", "-- fragment: live(c)\nc.a\n-- name: A\nSELECT {{live r}}\n", frag,
			"b.sql:1: fragment live is defined again (first at a.sql:1)"},
		{"never used", "-- name: A\nSELECT 1\n", frag,
			"b.sql:1: fragment live is defined but nothing uses it"},
		{"used above its definition", "-- fragment: f(r)\n{{live r}}\n-- name: A\nSELECT {{f r}}\n", frag,
			"a.sql:2: fragment live is used above its definition (b.sql:1)"},
		{"used in its own definition", "-- name: A\nSELECT {{live r}}\n", "-- fragment: live(r)\n\t{{live r}}\n",
			"b.sql:2: fragment live is used above its definition (b.sql:1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{"sql/a.sql": {Data: []byte(tc.a)}, "sql/b.sql": {Data: []byte(tc.b)}}
			if _, err := Load(fsys, "sql/*.sql"); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
