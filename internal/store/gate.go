package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/clasp-dev/clasp"
)

// GateTokenCols is the column list scanGateToken reads.
const GateTokenCols = `id, company_id, name, prefix, created_at, last_used_at, revoked_at` // #nosec G101 -- column names, no credential

// GateMaxStamps is the most stamps one gate check may ask about.
const GateMaxStamps = 1000

func scanGateToken(sc Row) (*clasp.GateToken, error) {
	var t clasp.GateToken
	if err := sc.Scan(&t.ID, &t.CompanyID, &t.Name, &t.Prefix, Time(&t.CreatedAt), NullTime(&t.LastUsedAt), NullTime(&t.RevokedAt)); err != nil {
		return nil, err
	}
	return &t, nil
}

// GateTokenCreateParams creates a gate token of a company. The caller
// makes the secret and gives only its hash and display prefix.
type GateTokenCreateParams struct {
	CompanyID string
	Name      string
	TokenHash string
	Prefix    string
	At        time.Time
}

// GateTokenCreate stores a new gate token. 400 invalid_request (name)
// for an empty or overlong name; 404 not_found when CompanyID names no
// company; 409 already_exists for a secret stored already.
func (c CRUD) GateTokenCreate(ctx context.Context, p *GateTokenCreateParams) (*clasp.GateToken, error) {
	name := strings.TrimSpace(p.Name)
	if name == "" || len(name) > 200 {
		return nil, clasp.InvalidField("name", "name is required, at most 200 characters.")
	}
	if _, err := c.CompanyGet(ctx, p.CompanyID); err != nil {
		return nil, err
	}
	args := Args{"id": c.d.NewID(), "company": p.CompanyID, "name": name, "prefix": p.Prefix, "hash": p.TokenHash, "at": p.At}
	var out *clasp.GateToken
	err := c.d.Write(ctx, func(q Querier) error {
		t, err := scanGateToken(q.QueryRow(ctx, "GateTokenInsert", args))
		if c.d.Unique(err) {
			return clasp.Errorf(clasp.CodeAlreadyExists, "A gate token with this secret exists already.")
		}
		out = t
		return Wrap(err, "create gate token")
	})
	return out, err
}

// GateTokenFind returns the gate token whose secret has hash tokenHash,
// revoked ones included (the caller judges them); 404 not_found.
func (c CRUD) GateTokenFind(ctx context.Context, tokenHash string) (*clasp.GateToken, error) {
	t, err := scanGateToken(c.d.Read().QueryRow(ctx, "GateTokenByHash", Args{"hash": tokenHash}))
	if c.d.NoRows(err) {
		return nil, ErrNotFound("gate token", "")
	}
	if err != nil {
		return nil, c.d.Translate(fmt.Errorf("find gate token: %w", err))
	}
	return t, nil
}

// GateTokenList lists the gate tokens of a company, oldest first.
func (c CRUD) GateTokenList(ctx context.Context, companyID string) ([]*clasp.GateToken, error) {
	ts, err := queryAll(ctx, c.d.Read(), "GateTokenList", Args{"company": companyID}, scanGateToken)
	if err != nil {
		return nil, c.d.Translate(fmt.Errorf("list gate tokens: %w", err))
	}
	return ts, nil
}

// GateTokenRevoke revokes gate token id of companyID at at; a revoked
// token answers unchanged. 404 not_found (also for another company's).
func (c CRUD) GateTokenRevoke(ctx context.Context, companyID, id string, at time.Time) (*clasp.GateToken, error) {
	var out *clasp.GateToken
	err := c.d.Write(ctx, func(q Querier) error {
		args := Args{"id": id, "company": companyID, "at": at}
		t, err := scanGateToken(q.QueryRow(ctx, "GateTokenRevoke", args))
		if c.d.NoRows(err) {
			t, err = scanGateToken(q.QueryRow(ctx, "GateTokenGet", args))
			if c.d.NoRows(err) {
				return ErrNotFound("gate token", id)
			}
		}
		out = t
		return Wrap(err, "revoke gate token %s", id)
	})
	return out, err
}

// GateTokenUsed records that gate token id was used at at, at most once a
// minute.
func (c CRUD) GateTokenUsed(ctx context.Context, id string, at time.Time) error {
	return c.d.Write(ctx, func(q Querier) error {
		_, err := q.Exec(ctx, "GateTokenUsed", Args{"id": id, "at": at})
		return Wrap(err, "record use of gate token %s", id)
	})
}

// GateCheck answers, for each stamp in order, whether a commit carrying
// it may be written (RULES.md, The git gate, G1-G3): yes when the issue
// of companyID is held by a live run at that epoch (held), or is done and
// was completed under it (completed); no when a later checkout took it
// (superseded), its holder at that epoch is dead (dead_holder), nobody
// holds it at that epoch and it is not done at it (not_held), the epoch
// was never reached (future), or no issue of companyID has the
// identifier (unknown: another company's issue answers the same). One
// statement for all the stamps; it reads, it never writes. 400
// invalid_request (stamps) for more than GateMaxStamps.
func (c CRUD) GateCheck(ctx context.Context, companyID string, stamps []clasp.GateStamp) ([]*clasp.GateVerdict, error) {
	if len(stamps) > GateMaxStamps {
		return nil, clasp.InvalidField("stamps", "At most %d stamps per check, not %d: split the range.", GateMaxStamps, len(stamps))
	}
	type state struct {
		status         string
		epoch          int64
		completedEpoch *int64
		holder         *string
		holderLive     *int64
		agent          *string
	}
	seen := map[string]bool{}
	idents := []string{}
	for _, s := range stamps {
		id := strings.ToUpper(s.Issue)
		if !seen[id] {
			seen[id] = true
			idents = append(idents, id)
		}
	}
	found := map[string]*state{}
	if len(idents) > 0 {
		js, _ := json.Marshal(idents)
		rows, err := c.d.Read().Query(ctx, "GateStamps", Args{"company": companyID, "idents": string(js)})
		if err != nil {
			return nil, c.d.Translate(fmt.Errorf("gate check: %w", err))
		}
		defer rows.Close()
		for rows.Next() {
			var ident string
			var st state
			if err := rows.Scan(&ident, &st.status, &st.epoch, &st.completedEpoch, &st.holder, &st.holderLive, &st.agent); err != nil {
				return nil, c.d.Translate(fmt.Errorf("gate check: %w", err))
			}
			found[ident] = &st
		}
		if err := rows.Err(); err != nil {
			return nil, c.d.Translate(fmt.Errorf("gate check: %w", err))
		}
	}
	out := make([]*clasp.GateVerdict, 0, len(stamps))
	for _, s := range stamps {
		id := strings.ToUpper(s.Issue)
		v := &clasp.GateVerdict{Issue: id, Epoch: s.Epoch}
		out = append(out, v)
		st := found[id]
		if st == nil {
			v.Reason = clasp.GateUnknown
			v.Message = fmt.Sprintf("unknown: no issue %s in this company", id)
			continue
		}
		v.CurrentEpoch, v.Status = &st.epoch, &st.status
		live := st.holder != nil && st.holderLive != nil && *st.holderLive == 1
		if st.holder != nil {
			v.HolderRunID, v.HolderAgent = st.holder, st.agent
		}
		holder := "held by no run"
		switch {
		case live:
			holder = fmt.Sprintf("held by run %s of agent %s", *st.holder, cmp.Or(deref(st.agent), "(unknown)"))
		case st.holder != nil:
			holder = fmt.Sprintf("held by run %s of agent %s, which is dead", *st.holder, cmp.Or(deref(st.agent), "(unknown)"))
		case st.status == string(clasp.IssueDone) && st.completedEpoch != nil:
			holder = fmt.Sprintf("done, completed at epoch %d", *st.completedEpoch)
		}
		switch {
		case s.Epoch < st.epoch:
			v.Reason = clasp.GateSuperseded
			v.Message = fmt.Sprintf("superseded: %s is at epoch %d, %s", id, st.epoch, holder)
		case s.Epoch > st.epoch:
			v.Reason = clasp.GateFuture
			v.Message = fmt.Sprintf("future: %s never reached epoch %d (it is at epoch %d)", id, s.Epoch, st.epoch)
		case st.status == string(clasp.IssueDone) && st.completedEpoch != nil && *st.completedEpoch == s.Epoch:
			v.OK, v.Reason = true, clasp.GateCompleted
			v.Message = fmt.Sprintf("completed: %s was done at epoch %d", id, s.Epoch)
		case live:
			v.OK, v.Reason = true, clasp.GateHeld
			v.Message = fmt.Sprintf("held: %s is at epoch %d, %s", id, st.epoch, holder)
		case st.holder != nil:
			v.Reason = clasp.GateDeadHolder
			v.Message = fmt.Sprintf("dead holder: %s is at epoch %d, %s", id, st.epoch, holder)
		default:
			v.Reason = clasp.GateNotHeld
			v.Message = fmt.Sprintf("not held: %s is at epoch %d, %s (status %s)", id, st.epoch, holder, st.status)
		}
	}
	return out, nil
}
