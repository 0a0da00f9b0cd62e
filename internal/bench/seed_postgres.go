package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/httpapi"
)

// seedPostgresBatch is how many filler issues one PostgreSQL seed
// transaction copies in.
const seedPostgresBatch = 50000

// connectSeed opens a connection to the database at url whose search_path
// is the in-process PostgreSQL server's schema.
func connectSeed(ctx context.Context, url, schema string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("bench: seed: %w", err)
	}
	cfg.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bench: seed: connect: %w", err)
	}
	return conn, nil
}

// seedPostgresFiller is seedFiller for the in-process PostgreSQL server
// (its schema of the database at url): the same rows, seedPostgresBatch
// per transaction, through COPY.
func seedPostgresFiller(ctx context.Context, url, schema, companyID string, n int, pr *seedProgress) error {
	conn, err := connectSeed(ctx, url, schema)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	start := time.Now().Add(-time.Duration(n) * time.Microsecond)
	for done := 0; done < n; {
		k := min(seedPostgresBatch, n-done)
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var (
				last   int64
				prefix string
			)
			if err := tx.QueryRow(ctx, `UPDATE companies SET issue_counter = issue_counter + $1 WHERE id = $2 RETURNING issue_counter, issue_prefix`,
				k, companyID).Scan(&last, &prefix); err != nil {
				return fmt.Errorf("advance the issue counter of company %s: %w", companyID, err)
			}
			first := last - int64(k) + 1
			rows := make([][]any, k)
			for i := range k {
				id, err := uuid.NewV7()
				if err != nil {
					return err
				}
				num := strconv.FormatInt(first+int64(i), 10)
				at := start.Add(time.Duration(done+i) * time.Microsecond)
				rows[i] = []any{id.String(), companyID, prefix + "-" + num, "filler issue " + num, "", "done", "medium", int32(2), at, at, at}
			}
			_, err := tx.CopyFrom(ctx, pgx.Identifier{"issues"},
				[]string{"id", "company_id", "identifier", "title", "description", "status", "priority", "priority_rank", "completed_at", "created_at", "updated_at"},
				pgx.CopyFromRows(rows))
			return err
		})
		if err != nil {
			return fmt.Errorf("bench: seed %d filler issues: %w", n, err)
		}
		done += k
		pr.step(done, n)
	}
	return nil
}

// seedPostgresAgents is seedAgents for the in-process PostgreSQL server:
// the same agents, keys and finished runs, seedAgentBatch per
// transaction, through COPY.
func seedPostgresAgents(ctx context.Context, url, schema, companyID string, n int, pr *seedProgress) error {
	conn, err := connectSeed(ctx, url, schema)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	start := time.Now().Add(-time.Duration(n) * time.Microsecond)
	for done := 0; done < n; {
		k := min(seedAgentBatch, n-done)
		agents, keys, runs := make([][]any, k), make([][]any, k), make([][]any, k)
		for i := range k {
			name := "seed-" + strconv.Itoa(done+i)
			agentID, keyID, runID, err := newIDs3()
			if err != nil {
				return err
			}
			at := start.Add(time.Duration(done+i) * time.Microsecond)
			token, hash := httpapi.NewToken(httpapi.TokenAgentKey)
			agents[i] = []any{agentID, companyID, name, clasp.NameKey(name), "bench seed", "active", at}
			keys[i] = []any{keyID, agentID, token[:httpapi.KeyPrefixLen], hash, at}
			runs[i] = []any{runID, companyID, agentID, "succeeded", "bench", int32(1), at, at, int32(0), at}
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"agents"},
				[]string{"id", "company_id", "name", "name_key", "role", "status", "created_at"}, pgx.CopyFromRows(agents)); err != nil {
				return fmt.Errorf("agents: %w", err)
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"agent_api_keys"},
				[]string{"id", "agent_id", "prefix", "token_hash", "created_at"}, pgx.CopyFromRows(keys)); err != nil {
				return fmt.Errorf("keys: %w", err)
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"runs"},
				[]string{"id", "company_id", "agent_id", "status", "invocation_source", "attempt", "started_at", "finished_at", "exit_code", "created_at"},
				pgx.CopyFromRows(runs)); err != nil {
				return fmt.Errorf("runs: %w", err)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("bench: seed %d filler agents: %w", n, err)
		}
		done += k
		pr.step(done, n)
	}
	return nil
}
