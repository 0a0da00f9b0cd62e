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
	got, err := Parse("company.sql", text)
	if err != nil {
		t.Fatal(err)
	}
	want := []Statement{
		{Name: "CompanyGet", File: "company.sql", Line: 3, Doc: "one company by id", SQL: "SELECT id FROM companies WHERE id = :id"},
		{Name: "CompanyInsert", File: "company.sql", Line: 7, SQL: "INSERT INTO companies (id) VALUES (:id)\n\t-- L1: a tag inside the statement stays\n\tRETURNING id"},
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
		{"SQL before the first block", "SELECT 1\n-- name: A\nSELECT 2", `f.sql:1: SQL before the first "-- name:" line`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.sql", tc.text)
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
