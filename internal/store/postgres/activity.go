package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// logActivity appends one audit row in transaction tx, attributed to actor
// (and the run it acts in). details is marshalled to a JSON object.
func logActivity(ctx context.Context, tx pgx.Tx, companyID string, actor store.Actor, action, entityType, entityID string, details any) error {
	b, err := json.Marshal(details)
	if err != nil {
		return fmt.Errorf("activity %s details: %w", action, err)
	}
	args := actorArgs(namedArgs{"company": companyID, "action": action, "entity_type": entityType, "entity_id": entityID,
		"details": string(b)}, actor)
	if _, err := tx.Exec(ctx, q("ActivityInsert"), args); err != nil {
		return fmt.Errorf("write activity %s of %s %s: %w", action, entityType, entityID, err)
	}
	return nil
}

// jsonArg marshals v for a @param::jsonb argument.
func jsonArg(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// ActivityList lists activity rows, newest first, narrowed to a company, an
// entity and an action when those are set. The cursor is the last row's id;
// nextCursor is "" on the last page. 400 invalid_request for a bad cursor.
func (s *Store) ActivityList(ctx context.Context, p *store.ActivityListParams) ([]*clasp.Activity, string, error) {
	var (
		where []string
		args  []any
	)
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if p.CompanyID != "" {
		add("company_id = ?", p.CompanyID)
	}
	if p.EntityID != "" {
		add("entity_id = ?", p.EntityID)
	}
	if p.Action != "" {
		add("action = ?", p.Action)
	}
	if p.Page.Cursor != "" {
		id, err := decodeIDCursor(p.Page.Cursor)
		if err != nil {
			return nil, "", err
		}
		add("id < ?", id)
	}
	limit := pageLimit(p.Page.Limit)
	q := "SELECT " + activityCols + " FROM activity"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, limit+1)
	q += " ORDER BY id DESC LIMIT $" + strconv.Itoa(len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, "", translate(fmt.Errorf("list activity: %w", err))
	}
	list, err := scanAll(rows, scanActivity)
	if err != nil {
		return nil, "", translate(fmt.Errorf("list activity: %w", err))
	}
	list, next := store.TrimPage(list, limit, func(a *clasp.Activity) string { return encodeIDCursor(a.ID) })
	return list, next, nil
}
