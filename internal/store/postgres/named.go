package postgres

import (
	"context"
	"regexp"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// namedArgs are the @name arguments of a statement, like pgx.NamedArgs,
// passed as the first argument of a query method. Unlike pgx.NamedArgs,
// which lexes the whole statement text on every call (18 % of the bench
// process's CPU with the multi-kilobyte lock rule CTEs), the
// rewrite to $n placeholders is done once per statement text and cached:
// a call then only looks its arguments up by name.
type namedArgs map[string]any

// RewriteQuery implements pgx.QueryRewriter: sql with $1, $2, ... for its
// @names (as pgx.NamedArgs rewrites it; a name without a value is NULL),
// and the values in that order.
func (na namedArgs) RewriteQuery(ctx context.Context, conn *pgx.Conn, sql string, args []any) (string, []any, error) {
	c, err := compileNamed(ctx, sql)
	if err != nil {
		return "", nil, err
	}
	if c == nil { // not cacheable: pgx's own rewrite
		return pgx.NamedArgs(na).RewriteQuery(ctx, conn, sql, args)
	}
	out := make([]any, len(c.names))
	for i, n := range c.names {
		out[i] = na[n]
	}
	return c.sql, out, nil
}

// compiledNamed is a statement rewritten to $n placeholders; names[i] is
// the name of $(i+1).
type compiledNamed struct {
	sql   string
	names []string
}

// maxCompiledNamed bounds the cache; the statements are constants, so it
// holds a few dozen.
const maxCompiledNamed = 1024

var (
	namedCache   sync.Map // statement text → *compiledNamed
	namedCached  atomic.Int64
	namedPattern = regexp.MustCompile(`@([A-Za-z_][A-Za-z0-9_]*)`)
)

// argName marks, while compiling, the value of one name.
type argName string

// compileNamed returns sql rewritten once by pgx's own lexer (so quoting,
// comments and casts are treated exactly as pgx.NamedArgs treats them),
// from the cache after the first call; nil when the cache is full or the
// lexer found a name the candidate scan did not (then the caller falls
// back to pgx.NamedArgs).
func compileNamed(ctx context.Context, sql string) (*compiledNamed, error) {
	if c, ok := namedCache.Load(sql); ok {
		return c.(*compiledNamed), nil
	}
	if namedCached.Load() >= maxCompiledNamed {
		return nil, nil
	}
	// Every @word is a candidate; those inside literals or comments are
	// not rewritten by the lexer and simply do not appear in its output.
	marks := pgx.NamedArgs{}
	for _, m := range namedPattern.FindAllStringSubmatch(sql, -1) {
		marks[m[1]] = argName(m[1])
	}
	newSQL, vals, err := marks.RewriteQuery(ctx, nil, sql, nil)
	if err != nil {
		return nil, err
	}
	c := &compiledNamed{sql: newSQL, names: make([]string, len(vals))}
	for i, v := range vals {
		n, ok := v.(argName)
		if !ok {
			return nil, nil
		}
		c.names[i] = string(n)
	}
	if _, loaded := namedCache.LoadOrStore(sql, c); !loaded {
		namedCached.Add(1)
	}
	return c, nil
}
