package bench

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, as the store uses
)

// seedBatch is how many filler issues one seed transaction inserts.
const seedBatch = 10000

// seedFiller bulk-inserts n filler issues into company companyID of the
// in-process server's SQLite file at path, seedBatch per transaction,
// straight through database/sql (the store has no bulk insert; one
// IssueCreate per issue would take minutes for 1,000,000). The rows are
// those IssueCreate writes for an unassigned done issue (status done,
// priority medium, completed_at set, identifiers PREFIX-N from the
// company's counter, which the same transaction advances), created before
// now, oldest first; no activity rows. Done issues are never eligible for
// a checkout of todo or a claim, so they weigh only as table and index
// size: the scale figures of issue 5 item 5.
func seedFiller(ctx context.Context, path, companyID string, n int) error {
	db, err := sql.Open("sqlite", path+"?_txlock=immediate&_pragma=busy_timeout(30000)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return fmt.Errorf("bench: seed: open %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	start := time.Now().Add(-time.Duration(n) * time.Microsecond).UnixMicro()
	for done := 0; done < n; {
		k := min(seedBatch, n-done)
		if err := seedTx(ctx, db, companyID, k, start+int64(done)); err != nil {
			return fmt.Errorf("bench: seed %d filler issues: %w", n, err)
		}
		done += k
	}
	return nil
}

// seedTx inserts k filler issues in one transaction, created at t0, t0+1 µs, ...
func seedTx(ctx context.Context, db *sql.DB, companyID string, k int, t0 int64) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var (
		last   int64
		prefix string
	)
	if err := tx.QueryRowContext(ctx, `UPDATE companies SET issue_counter = issue_counter + ? WHERE id = ? RETURNING issue_counter, issue_prefix`,
		k, companyID).Scan(&last, &prefix); err != nil {
		return fmt.Errorf("advance the issue counter of company %s: %w", companyID, err)
	}
	st, err := tx.PrepareContext(ctx, `INSERT INTO issues (id, company_id, identifier, title, description, status, priority, priority_rank,
		assignee_agent_id, started_at, completed_at, cancelled_at, created_at, updated_at)
		VALUES (?, ?, ?, ?, '', 'done', 'medium', 2, NULL, NULL, ?, NULL, ?, ?)`)
	if err != nil {
		return err
	}
	defer st.Close()
	first := last - int64(k) + 1
	for i := range k {
		num := first + int64(i)
		id, err := uuid.NewV7()
		if err != nil {
			return err
		}
		at := t0 + int64(i)
		if _, err := st.ExecContext(ctx, id.String(), companyID, prefix+"-"+strconv.FormatInt(num, 10), "filler issue "+strconv.FormatInt(num, 10), at, at, at); err != nil {
			return err
		}
	}
	return tx.Commit()
}
