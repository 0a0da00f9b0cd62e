package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// SettingGet returns the server setting key; 404 not_found if it is unset.
func (s *Store) SettingGet(ctx context.Context, key string) (string, error) {
	var v string
	err := s.pool.QueryRow(ctx, q("SettingGet"), namedArgs{"key": key}).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", notFound("setting", key)
	}
	if err != nil {
		return "", translate(fmt.Errorf("get setting %s: %w", key, err))
	}
	return v, nil
}

// SettingPutIfAbsent stores value under key unless the key is set, and
// returns the stored value (the existing one if there was one; of two
// concurrent first writers, the one that committed first).
func (s *Store) SettingPutIfAbsent(ctx context.Context, key, value string) (string, error) {
	var stored string
	err := s.retry(ctx, func() error {
		return wrap(s.pool.QueryRow(ctx, q("SettingInsert"), namedArgs{"key": key, "value": value}).Scan(&stored), "put setting %s", key)
	})
	return stored, err
}

// CompanyCreate creates a company. 400 invalid_request for an empty name or
// a prefix that is not 2-10 upper-case letters; 409 already_exists if the
// issue prefix is taken.
func (s *Store) CompanyCreate(ctx context.Context, p *store.CompanyCreateParams) (*clasp.Company, error) {
	name := strings.TrimSpace(p.Name)
	if name == "" {
		return nil, clasp.InvalidField("name", "name is required.")
	}
	if !clasp.ValidIssuePrefix(p.IssuePrefix) {
		return nil, clasp.InvalidField("issuePrefix", "issuePrefix must be 2 to 10 upper-case letters.")
	}
	args := actorArgs(namedArgs{"id": s.newID(), "name": name, "prefix": p.IssuePrefix}, p.Actor)
	var out *clasp.Company
	err := s.retry(ctx, func() error {
		c, err := store.ScanCompany(s.pool.QueryRow(ctx, q("CompanyInsert"), args))
		if isUnique(err) {
			return clasp.Errorf(clasp.CodeAlreadyExists, "Issue prefix %s is taken by another company.", p.IssuePrefix).
				WithDetails("field", "issuePrefix")
		}
		out = c
		return wrap(err, "create company")
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CompanyGet returns a company; 404 not_found.
func (s *Store) CompanyGet(ctx context.Context, id string) (*clasp.Company, error) {
	c, err := store.ScanCompany(s.pool.QueryRow(ctx, q("CompanyGet"), namedArgs{"id": id}))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("company", id)
	}
	if err != nil {
		return nil, translate(fmt.Errorf("get company %s: %w", id, err))
	}
	return c, nil
}

// CompanyList returns companies, oldest first, one keyset page at a time.
func (s *Store) CompanyList(ctx context.Context, page store.Page) ([]*clasp.Company, string, error) {
	return listPage(ctx, s, "companies", store.CompanyCols, nil, nil, page, true, store.ScanCompany,
		func(c *clasp.Company) string { return encodeCursor(c.CreatedAt, c.ID) })
}

// listPage runs one keyset page of a list ordered by (created_at, id):
// oldest first when asc, else newest first. where (conditions with ?
// placeholders) and args narrow it. It fetches one row more than the limit
// to know whether a next page exists.
func listPage[T any](ctx context.Context, s *Store, table, cols string, where []string, args []any, page store.Page,
	asc bool, scan func(store.Row) (*T, error), cursorOf func(*T) string) ([]*T, string, error) {
	q, args, limit, err := store.KeysetQuery(table, cols, where, args, page, asc, func(t time.Time) any { return t })
	if err != nil {
		return nil, "", err
	}
	rows, err := s.pool.Query(ctx, numbered(q), args...)
	if err != nil {
		return nil, "", translate(fmt.Errorf("list %s: %w", table, err))
	}
	list, err := store.ScanAll(rows, scan)
	if err != nil {
		return nil, "", translate(fmt.Errorf("list %s: %w", table, err))
	}
	list, next := store.TrimPage(list, limit, cursorOf)
	return list, next, nil
}

// numbered replaces each ? of q by $1, $2, ... in order (q holds no other ?).
func numbered(q string) string {
	var b strings.Builder
	n := 0
	for _, part := range strings.SplitAfter(q, "?") {
		if strings.HasSuffix(part, "?") {
			n++
			b.WriteString(part[:len(part)-1] + "$" + strconv.Itoa(n))
			continue
		}
		b.WriteString(part)
	}
	return b.String()
}
