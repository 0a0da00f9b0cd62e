package bench

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/httpapi"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, as the store uses
)

// seedBatch is how many filler issues one seed transaction inserts;
// seedAgentBatch how many filler agents (each with its key and run).
const (
	seedBatch      = 10000
	seedAgentBatch = 2000
)

// seedProgress prints the progress of a seed to w (io.Discard: nothing):
// with tty one line rewritten in place, else a line at most every 5 s
// and one at the end.
type seedProgress struct {
	w     io.Writer
	tty   bool
	what  string // e.g. "seed 999000 issues"
	start time.Time
	last  time.Time
}

func newSeedProgress(w io.Writer, tty bool, what string) *seedProgress {
	now := time.Now()
	return &seedProgress{w: w, tty: tty, what: what, start: now, last: now}
}

// step reports done of total rows inserted so far.
func (p *seedProgress) step(done, total int) {
	if p == nil || p.w == io.Discard {
		return
	}
	end := done >= total
	if !p.tty && !end && time.Since(p.last) < 5*time.Second {
		return
	}
	p.last = time.Now()
	line := fmt.Sprintf("%-24s %d/%d in %.1fs", p.what, done, total, time.Since(p.start).Seconds())
	switch {
	case p.tty && end:
		fmt.Fprintf(p.w, "\r\033[K%s\n", line)
	case p.tty:
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	default:
		fmt.Fprintln(p.w, line)
	}
}

// openSeedDB opens the in-process server's SQLite file at path for a seed:
// one connection, BEGIN IMMEDIATE, synchronous=NORMAL (a lost seed is
// only a failed bench run), waiting for the server's writer.
func openSeedDB(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", path+"?_txlock=immediate&_pragma=busy_timeout(30000)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, fmt.Errorf("bench: seed: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// seedFiller bulk-inserts n filler issues into company companyID of the
// in-process server's SQLite file at path, seedBatch per transaction,
// straight through database/sql (the store has no bulk insert; one
// IssueCreate per issue would take minutes for 1,000,000). The rows are
// those IssueCreate writes for an unassigned done issue (status done,
// priority medium, completed_at set, identifiers PREFIX-N from the
// company's counter, which the same transaction advances), created before
// now, oldest first; no activity rows. Done issues are never eligible for
// a checkout of todo or a claim, so they weigh only as table and index
// size: the scale figures (BENCHMARKS.md).
// pr (nil: silent) reports the progress.
func seedFiller(ctx context.Context, path, companyID string, n int, pr *seedProgress) error {
	db, err := openSeedDB(path)
	if err != nil {
		return err
	}
	defer db.Close()
	start := time.Now().Add(-time.Duration(n) * time.Microsecond).UnixMicro()
	for done := 0; done < n; {
		k := min(seedBatch, n-done)
		if err := seedTx(ctx, db, companyID, k, start+int64(done)); err != nil {
			return fmt.Errorf("bench: seed %d filler issues: %w", n, err)
		}
		done += k
		pr.step(done, n)
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

// seedAgents bulk-inserts n filler agents into company companyID of the
// in-process server's SQLite file at path, seedAgentBatch per transaction,
// straight through database/sql like seedFiller: each an active agent
// named seed-<i> (the agents row AgentCreate writes), with one API key
// (the agent_api_keys row AgentKeyCreate writes: a fresh clasp_ak_ token's
// hash and prefix; the token itself is thrown away) and one finished run
// (status succeeded, invocation source bench, no run token, no lease),
// created before now, oldest first; no activity rows. They never send a
// request: they weigh as the size of the key lookup (token_hash), the
// agents and runs tables and their indexes, the scale figures
// (BENCHMARKS.md, "10,000 agents"). pr (nil: silent) reports the progress.
func seedAgents(ctx context.Context, path, companyID string, n int, pr *seedProgress) error {
	db, err := openSeedDB(path)
	if err != nil {
		return err
	}
	defer db.Close()
	start := time.Now().Add(-time.Duration(n) * time.Microsecond).UnixMicro()
	for done := 0; done < n; {
		k := min(seedAgentBatch, n-done)
		if err := seedAgentTx(ctx, db, companyID, done, k, start+int64(done)); err != nil {
			return fmt.Errorf("bench: seed %d filler agents: %w", n, err)
		}
		done += k
		pr.step(done, n)
	}
	return nil
}

// seedAgentTx inserts filler agents first, first+1, ..., first+k-1 with
// their key and run in one transaction, created at t0, t0+1 µs, ...
func seedAgentTx(ctx context.Context, db *sql.DB, companyID string, first, k int, t0 int64) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	agentSt, err := tx.PrepareContext(ctx, `INSERT INTO agents (id, company_id, name, name_key, role, status, created_at)
		VALUES (?, ?, ?, ?, 'bench seed', 'active', ?)`)
	if err != nil {
		return err
	}
	defer agentSt.Close()
	keySt, err := tx.PrepareContext(ctx, `INSERT INTO agent_api_keys (id, agent_id, prefix, token_hash, created_at) VALUES (?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer keySt.Close()
	runSt, err := tx.PrepareContext(ctx, `INSERT INTO runs (id, company_id, agent_id, status, invocation_source, attempt,
		started_at, finished_at, exit_code, created_at)
		VALUES (?, ?, ?, 'succeeded', 'bench', 1, ?, ?, 0, ?)`)
	if err != nil {
		return err
	}
	defer runSt.Close()
	for i := range k {
		at := t0 + int64(i)
		name := "seed-" + strconv.Itoa(first+i)
		agentID, keyID, runID, err := newIDs3()
		if err != nil {
			return err
		}
		if _, err := agentSt.ExecContext(ctx, agentID, companyID, name, clasp.NameKey(name), at); err != nil {
			return fmt.Errorf("agent %s: %w", name, err)
		}
		token, hash := httpapi.NewToken(httpapi.TokenAgentKey)
		if _, err := keySt.ExecContext(ctx, keyID, agentID, token[:httpapi.KeyPrefixLen], hash, at); err != nil {
			return fmt.Errorf("key of agent %s: %w", name, err)
		}
		if _, err := runSt.ExecContext(ctx, runID, companyID, agentID, at, at, at); err != nil {
			return fmt.Errorf("run of agent %s: %w", name, err)
		}
	}
	return tx.Commit()
}

// newIDs3 returns three new UUIDv7 strings (the store's ids).
func newIDs3() (a, b, c string, err error) {
	var ids [3]string
	for i := range ids {
		id, err := uuid.NewV7()
		if err != nil {
			return "", "", "", err
		}
		ids[i] = id.String()
	}
	return ids[0], ids[1], ids[2], nil
}
