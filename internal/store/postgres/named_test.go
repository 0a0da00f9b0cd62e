package postgres

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
)

// TestNamedArgsRewriteLikePgx: the cached rewrite of namedArgs gives, for
// every statement of the store with named arguments (those of
// sql/*.sql) and for a few tricky
// texts, the same SQL and the same argument order as pgx.NamedArgs, also
// on the second (cached) call, and a name without a value becomes NULL.
func TestNamedArgsRewriteLikePgx(t *testing.T) {
	stmts := map[string]string{
		"literals and comments": "SELECT '@not', \"@neither\", $$ @nor $$ -- @comment\n, @a::text, /* @b */ @c, @a, @_d1, e@f",
		"no names":              "SELECT 1",
	}
	for _, name := range statements.Names() { // every statement of sql/*.sql
		stmts[name] = q(name)
	}
	for name, sql := range stmts {
		vals := pgx.NamedArgs{}
		for _, m := range namedPattern.FindAllStringSubmatch(sql, -1) {
			vals[m[1]] = "value of " + m[1]
		}
		delete(vals, "c") // a name without a value: NULL in both
		wantSQL, wantArgs, err := vals.RewriteQuery(t.Context(), nil, sql, nil)
		if err != nil {
			t.Fatalf("%s: pgx rewrite: %v", name, err)
		}
		for i := range 2 {
			gotSQL, gotArgs, err := namedArgs(vals).RewriteQuery(t.Context(), nil, sql, nil)
			if err != nil {
				t.Fatalf("%s: rewrite %d: %v", name, i, err)
			}
			if gotSQL != wantSQL {
				t.Errorf("%s: rewrite %d: SQL differs from pgx.NamedArgs':\n%s", name, i, cmp.Diff(wantSQL, gotSQL))
			}
			if diff := cmp.Diff(wantArgs, gotArgs); diff != "" {
				t.Errorf("%s: rewrite %d: arguments differ from pgx.NamedArgs' (-pgx +cached):\n%s", name, i, diff)
			}
		}
		if c, err := compileNamed(t.Context(), sql); err != nil || c == nil {
			t.Errorf("%s: not cached (%v)", name, err)
		}
	}
}
