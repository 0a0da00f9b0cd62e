package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// logActivity appends one audit row, attributed to actor (and the run it
// acts in), in the transaction's time. details is marshalled to a JSON
// object.
func (t *wtx) logActivity(ctx context.Context, companyID string, actor store.Actor, action, entityType, entityID string, details any) error {
	b, err := json.Marshal(details)
	if err != nil {
		return fmt.Errorf("activity %s details: %w", action, err)
	}
	actorType := actor.Type
	if actorType != clasp.ActorAgent && actorType != clasp.ActorBoard {
		actorType = clasp.ActorSystem
	}
	if _, err := t.exec(ctx, "ActivityInsert", activityArgs(companyID, string(actorType), actor.ID(),
		nullable(actor.RunID), action, entityType, entityID, string(b), t.now, nullable(actor.RequestID))...); err != nil {
		return fmt.Errorf("write activity %s of %s %s: %w", action, entityType, entityID, err)
	}
	t.wroteActivity = true
	return nil
}

// activityArgs are the arguments of statement ActivityInsert.
func activityArgs(companyID, actorType, actorID string, actorRun any, action, entityType, entityID, details string, now int64, request any) []any {
	return []any{sql.Named("company", companyID), sql.Named("actor_type", actorType), sql.Named("actor_id", actorID),
		sql.Named("actor_run", actorRun), sql.Named("action", action), sql.Named("entity_type", entityType),
		sql.Named("entity_id", entityID), sql.Named("details", details), sql.Named("now", now), sql.Named("actor_request", request)}
}

// ActivityList lists activity rows, newest first, narrowed to a company, an
// entity and an action when those are set. The cursor is the last row's id;
// nextCursor is "" on the last page. 400 invalid_request for a bad cursor.
func (s *Store) ActivityList(ctx context.Context, p *store.ActivityListParams) ([]*clasp.Activity, string, error) {
	var (
		where []string
		args  []any
	)
	if p.CompanyID != "" {
		where, args = append(where, "company_id = ?"), append(args, p.CompanyID)
	}
	if p.EntityID != "" {
		where, args = append(where, "entity_id = ?"), append(args, p.EntityID)
	}
	if p.Action != "" {
		where, args = append(where, "action = ?"), append(args, p.Action)
	}
	if p.Page.Cursor != "" {
		id, err := decodeIDCursor(p.Page.Cursor)
		if err != nil {
			return nil, "", err
		}
		where, args = append(where, "id < ?"), append(args, id)
	}
	limit := pageLimit(p.Page.Limit)
	q := "SELECT " + activityCols + " FROM activity"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ") // #nosec G202 -- where holds fixed column conditions with ? placeholders; the values are bound
	}
	q += " ORDER BY id DESC LIMIT ?"
	rows, err := s.r.QueryContext(ctx, q, append(args, limit+1)...)
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
