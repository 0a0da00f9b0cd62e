package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// SettingGet returns the server setting key; 404 not_found if it is unset.
func (s *Store) SettingGet(ctx context.Context, key string) (string, error) {
	var v string
	err := s.readRow(ctx, "SettingGet", sql.Named("key", key)).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", notFound("setting", key)
	}
	if err != nil {
		return "", translate(fmt.Errorf("get setting %s: %w", key, err))
	}
	return v, nil
}

// SettingPutIfAbsent stores value under key unless the key is set, and
// returns the stored value (the existing one if there was one).
func (s *Store) SettingPutIfAbsent(ctx context.Context, key, value string) (string, error) {
	var stored string
	err := s.write(ctx, func(tx *wtx) error {
		if _, err := tx.exec(ctx, "SettingInsert", sql.Named("key", key), sql.Named("value", value)); err != nil {
			return fmt.Errorf("put setting %s: %w", key, err)
		}
		return wrap(tx.queryRow(ctx, "SettingGet", sql.Named("key", key)).Scan(&stored), "get setting %s", key)
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
	var out *clasp.Company
	err := s.write(ctx, func(tx *wtx) error {
		c, err := store.ScanCompany(tx.queryRow(ctx, "CompanyInsert", sql.Named("id", tx.s.newID()), sql.Named("name", name),
			sql.Named("prefix", p.IssuePrefix), sql.Named("now", tx.now)))
		if isUnique(err) {
			return clasp.Errorf(clasp.CodeAlreadyExists, "Issue prefix %s is taken by another company.", p.IssuePrefix).
				WithDetails("field", "issuePrefix")
		}
		if err != nil {
			return fmt.Errorf("create company: %w", err)
		}
		out = c
		return tx.logActivity(ctx, c.ID, p.Actor, clasp.ActionCompanyCreated, "company", c.ID, map[string]any{
			"name": c.Name, "issuePrefix": c.IssuePrefix,
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CompanyGet returns a company; 404 not_found.
func (s *Store) CompanyGet(ctx context.Context, id string) (*clasp.Company, error) {
	c, err := store.ScanCompany(s.readRow(ctx, "CompanyGet", sql.Named("id", id)))
	if errors.Is(err, sql.ErrNoRows) {
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
// oldest first when asc, else newest first. where and args narrow it.
// It fetches one row more than the limit to know whether a next page exists.
func listPage[T any](ctx context.Context, s *Store, table, cols string, where []string, args []any, page store.Page,
	asc bool, scan func(store.Row) (*T, error), cursorOf func(*T) string) ([]*T, string, error) {
	q, args, limit, err := store.KeysetQuery(table, cols, where, args, page, asc, func(t time.Time) any { return micros(t) })
	if err != nil {
		return nil, "", err
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", translate(fmt.Errorf("list %s: %w", table, err))
	}
	list, err := scanAll(rows, scan)
	if err != nil {
		return nil, "", translate(fmt.Errorf("list %s: %w", table, err))
	}
	list, next := store.TrimPage(list, limit, cursorOf)
	return list, next, nil
}
