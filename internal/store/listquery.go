package store

// The list statements whose filters are optional: the one place where a
// statement is put together in Go, from fixed column conditions with ?
// placeholders (PostgreSQL numbers them); every value is bound.

import (
	"strings"
	"time"
)

// KeysetQuery is the SELECT of one keyset page of table (columns cols)
// ordered by (created_at, id), oldest first when asc, else newest first,
// narrowed by where (conditions with ? placeholders) and args, after
// page.Cursor when set; it reads one row more than the page's limit, to
// know whether a next page exists (TrimPage). at converts the cursor's
// time to the store's column value. Errors: 400 invalid_request for a bad
// cursor.
func KeysetQuery(table, cols string, where []string, args []any, page Page, asc bool, at func(time.Time) any) (q string, qargs []any, limit int, err error) {
	if page.Cursor != "" {
		t, id, err := DecodeCursor(page.Cursor)
		if err != nil {
			return "", nil, 0, err
		}
		cmp := "<"
		if asc {
			cmp = ">"
		}
		where, args = append(where, "(created_at, id) "+cmp+" (?, ?)"), append(args, at(t), id)
	}
	q = "SELECT " + cols + " FROM " + table
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	if asc {
		q += " ORDER BY created_at, id LIMIT ?"
	} else {
		q += " ORDER BY created_at DESC, id DESC LIMIT ?"
	}
	limit = PageLimit(page.Limit)
	return q, append(args, limit+1), limit, nil
}

// ActivityQuery is the SELECT of one page of activity (columns cols),
// newest first, narrowed to p's company, entity and action when set, after
// the id cursor p.Page.Cursor when set; it reads one row more than the
// page's limit (TrimPage). Errors: 400 invalid_request for a bad cursor.
func ActivityQuery(cols string, p *ActivityListParams) (q string, args []any, limit int, err error) {
	var where []string
	for _, f := range []struct{ cond, v string }{
		{"company_id = ?", p.CompanyID}, {"entity_id = ?", p.EntityID}, {"action = ?", p.Action},
	} {
		if f.v != "" {
			where, args = append(where, f.cond), append(args, f.v)
		}
	}
	if p.Page.Cursor != "" {
		id, err := DecodeIDCursor(p.Page.Cursor)
		if err != nil {
			return "", nil, 0, err
		}
		where, args = append(where, "id < ?"), append(args, id)
	}
	q = "SELECT " + cols + " FROM activity"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	limit = PageLimit(p.Page.Limit)
	return q + " ORDER BY id DESC LIMIT ?", append(args, limit+1), limit, nil
}
