package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/sqlite"
)

// The textbook limit (target limit) of a cycle: each transition is the
// least a database must do for it, with the same durability and clients as
// the server: one conditional UPDATE of the issue (the lock is free or the
// caller's run's) and the activity row of the change, prepared, and on
// PostgreSQL one statement (one CTE, its own implicit transaction, one
// round trip). No run check, no authentication, no assignee rule, no lock
// answer read back: what clasp's statements add over it is what the
// http / limit and raw / limit ratios show.
const (
	limitPGCheckout = `WITH c AS (
	UPDATE issues SET checkout_run_id = $2, execution_run_id = $2, status = 'in_progress',
		checkout_epoch = checkout_epoch + 1, execution_locked_at = now(), started_at = coalesce(started_at, now()), updated_at = now()
	WHERE id = $1 AND (checkout_run_id IS NULL OR checkout_run_id = $2)
	RETURNING id, company_id, checkout_epoch)
INSERT INTO activity (company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details)
SELECT company_id, 'agent', $3, $2, 'issue.checked_out', 'issue', id,
	jsonb_build_object('agentId', $3::text, 'runId', $2::text, 'checkoutEpoch', checkout_epoch) FROM c`
	limitPGRelease = `WITH c AS (
	UPDATE issues SET checkout_run_id = NULL, execution_run_id = NULL, execution_locked_at = NULL, status = 'todo', updated_at = now()
	WHERE id = $1 AND checkout_run_id = $2
	RETURNING id, company_id)
INSERT INTO activity (company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details)
SELECT company_id, 'agent', $3, $2, 'issue.released', 'issue', id,
	jsonb_build_object('previousCheckoutRunId', $2::text, 'previousExecutionRunId', $2::text, 'unassigned', false) FROM c`

	// SQLite has no UPDATE inside a CTE: a transition is the UPDATE and
	// the INSERT in one BEGIN IMMEDIATE ... COMMIT (one fsync with
	// synchronous=FULL).
	limitSQLiteCheckout = `UPDATE issues SET checkout_run_id = ?2, execution_run_id = ?2, status = 'in_progress',
	checkout_epoch = checkout_epoch + 1, execution_locked_at = ?3, started_at = coalesce(started_at, ?3), updated_at = ?3
WHERE id = ?1 AND (checkout_run_id IS NULL OR checkout_run_id = ?2)
RETURNING checkout_epoch`
	limitSQLiteRelease = `UPDATE issues SET checkout_run_id = NULL, execution_run_id = NULL, execution_locked_at = NULL, status = 'todo', updated_at = ?3
WHERE id = ?1 AND checkout_run_id = ?2
RETURNING checkout_epoch`
	limitSQLiteActivity = `INSERT INTO activity (company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at)
VALUES (?1, 'agent', ?2, ?3, ?4, 'issue', ?5, ?6, ?7)`
)

// errLimitNoRow is a textbook transition that changed no issue: the
// fixture is not in the state the loop expects.
var errLimitNoRow = errors.New("no issue changed")

// newPostgresLimit returns the textbook limit on a fresh schema of dsn
// (created and migrated by the store, with the fixture of setupRawFixture),
// run through a pgx pool of its own with a connection per goroutine
// (statements prepared once per connection: pgx's statement cache) whose
// backends are named app for the database CPU probe. drop closes the pool
// and drops the schema.
func newPostgresLimit(ctx context.Context, dsn, app string, nAgents, nIssues int) (*rawTarget, func(), error) {
	sc, err := synchronousCommit(ctx, dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: connect to --database-url: %w", err)
	}
	st, schema, dropStore, err := openPostgres(ctx, dsn, "limit", "", 4)
	if err != nil {
		return nil, nil, err
	}
	steps, err := setupRawFixture(ctx, store.New(st), nAgents, nIssues)
	if err != nil {
		dropStore()
		return nil, nil, fmt.Errorf("bench: limit fixture (PostgreSQL): %w", err)
	}
	cfg, err := pgxpool.ParseConfig(withAppName(dsn, app))
	if err != nil {
		dropStore()
		return nil, nil, fmt.Errorf("bench: limit pool: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	cfg.MaxConns = int32(nAgents) // #nosec G115 -- the bench's client count, at most 4096
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		dropStore()
		return nil, nil, fmt.Errorf("bench: limit pool: %w", err)
	}
	step := func(ctx context.Context, what, stmt string, s rawStep) error {
		tag, err := pool.Exec(ctx, stmt, s.IssueID, s.RunID, s.AgentID)
		if err == nil && tag.RowsAffected() != 1 {
			err = errLimitNoRow
		}
		if err != nil {
			return fmt.Errorf("limit %s of issue %s: %w", what, s.IssueID, err)
		}
		return nil
	}
	return &rawTarget{
			kind:     TargetLimit,
			sync:     sc,
			steps:    steps,
			open:     func(context.Context) error { return nil },
			close:    func() {},
			checkout: func(ctx context.Context, s rawStep) error { return step(ctx, "checkout", limitPGCheckout, s) },
			release:  func(ctx context.Context, s rawStep) error { return step(ctx, "release", limitPGRelease, s) },
		}, func() {
			pool.Close()
			dropStore()
		}, nil
}

// newSQLiteLimit returns the textbook limit on dir/limit-<mode>.db: the
// file is created and migrated by sqlite.Open with its fixture
// (setupRawFixture), then, while the phases using it run, opened through
// database/sql with the PRAGMAs of the store's writer and synchronous mode
// (full or normal) on one connection (SQLite has one writer), its three
// statements prepared on it. Each transition is BEGIN IMMEDIATE, the
// UPDATE ... RETURNING, the activity INSERT, COMMIT.
func newSQLiteLimit(ctx context.Context, dir, mode string, nAgents, nIssues int) (*rawTarget, error) {
	path := filepath.Join(dir, "limit-"+mode+".db")
	st, err := sqlite.Open(ctx, path, sqlite.Options{Synchronous: strings.ToUpper(mode)})
	if err != nil {
		return nil, fmt.Errorf("bench: open the limit store (%s): %w", mode, err)
	}
	steps, err := setupRawFixture(ctx, store.New(st), nAgents, nIssues)
	_ = st.Close() // the fixture is committed; the loop opens the file on its own
	if err != nil {
		return nil, fmt.Errorf("bench: limit fixture (%s): %w", mode, err)
	}
	var (
		db                    *sql.DB
		checkout, release, ac *sql.Stmt
	)
	r := &rawTarget{kind: TargetLimit, sync: mode, steps: steps}
	r.open = func(ctx context.Context) error {
		d, err := sql.Open("sqlite", path+"?_txlock=immediate"+
			"&_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)"+
			"&_pragma=synchronous("+strings.ToUpper(mode)+")&_pragma=cache_size(-32000)&_pragma=temp_store(MEMORY)")
		if err != nil {
			return fmt.Errorf("bench: open the limit database (%s): %w", mode, err)
		}
		d.SetMaxOpenConns(1)
		d.SetMaxIdleConns(1)
		var stmts [3]*sql.Stmt
		for i, q := range []string{limitSQLiteCheckout, limitSQLiteRelease, limitSQLiteActivity} {
			if stmts[i], err = d.PrepareContext(ctx, q); err != nil {
				_ = d.Close() // the prepare's error is the one returned
				return fmt.Errorf("bench: prepare the limit statements (%s): %w", mode, err)
			}
		}
		db, checkout, release, ac = d, stmts[0], stmts[1], stmts[2]
		return nil
	}
	r.close = func() {
		if db != nil {
			_ = db.Close() // closes the statements too
			db = nil
		}
	}
	step := func(ctx context.Context, what, action string, upd *sql.Stmt, s rawStep) error {
		err := func() error {
			now := time.Now().UnixMicro()
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			var epoch int64
			if err := tx.StmtContext(ctx, upd).QueryRowContext(ctx, s.IssueID, s.RunID, now).Scan(&epoch); err != nil {
				if errors.Is(err, sql.ErrNoRows) {
					return errLimitNoRow
				}
				return err
			}
			details := `{"agentId":"` + s.AgentID + `","runId":"` + s.RunID + `","checkoutEpoch":` + strconv.FormatInt(epoch, 10) + `}`
			if upd == release {
				details = `{"previousCheckoutRunId":"` + s.RunID + `","previousExecutionRunId":"` + s.RunID + `","unassigned":false}`
			}
			if _, err := tx.StmtContext(ctx, ac).ExecContext(ctx, s.CompanyID, s.AgentID, s.RunID, action, s.IssueID, details, now); err != nil {
				return err
			}
			return tx.Commit()
		}()
		if err != nil {
			return fmt.Errorf("limit %s of issue %s (%s): %w", what, s.IssueID, mode, err)
		}
		return nil
	}
	r.checkout = func(ctx context.Context, s rawStep) error {
		return step(ctx, "checkout", "issue.checked_out", checkout, s)
	}
	r.release = func(ctx context.Context, s rawStep) error {
		return step(ctx, "release", "issue.released", release, s)
	}
	return r, nil
}
