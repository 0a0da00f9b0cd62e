package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/clasp-dev/clasp"
)

// OperatorCols is the column list ScanOperatorToken reads.
const OperatorCols = `id, name, prefix, role, company_id, created_at, expires_at, last_used_at, revoked_at`

// ScanOperatorToken reads an OperatorCols row.
func ScanOperatorToken(sc Row) (*clasp.OperatorToken, error) {
	var t clasp.OperatorToken
	if err := sc.Scan(operatorDest(&t)...); err != nil {
		return nil, err
	}
	return &t, nil
}

func operatorDest(t *clasp.OperatorToken) []any {
	return []any{&t.ID, &t.Name, &t.Prefix, &t.Role, &t.CompanyID, Time(&t.CreatedAt), NullTime(&t.ExpiresAt), NullTime(&t.LastUsedAt), NullTime(&t.RevokedAt)}
}

// OperatorTokenCreateParams creates an operator token. The caller makes the
// secret and gives only its hash and display prefix.
type OperatorTokenCreateParams struct {
	Name      string
	Role      clasp.OperatorRole
	CompanyID string // "" for every company
	TokenHash string
	Prefix    string
	ExpiresAt *time.Time // nil: never
	At        time.Time  // the server's clock: the creation time
}

// BoardSession is a signed-in browser of the board: the token it was
// opened with and its times.
type BoardSession struct {
	Token      *clasp.OperatorToken
	CreatedAt  time.Time
	LastSeenAt time.Time
	ExpiresAt  time.Time // the absolute end
}

// BoardSessionCreateParams opens a board session.
type BoardSessionCreateParams struct {
	Hash      string // the hash of the session secret the cookie carries
	TokenID   string
	ExpiresAt time.Time
	At        time.Time
}

// OperatorTokenCreate stores a new operator token. 400 invalid_request
// for an empty or overlong name or an unknown role; 404 not_found when
// CompanyID names no company; 409 already_exists when the hash is stored
// already (the same secret twice).
func (c CRUD) OperatorTokenCreate(ctx context.Context, p *OperatorTokenCreateParams) (*clasp.OperatorToken, error) {
	name := strings.TrimSpace(p.Name)
	if name == "" || len(name) > 200 {
		return nil, clasp.InvalidField("name", "name is required, at most 200 characters.")
	}
	if !p.Role.Valid() {
		return nil, clasp.InvalidField("role", "role must be admin, operator or viewer, not %q.", p.Role)
	}
	if p.CompanyID != "" {
		if _, err := c.CompanyGet(ctx, p.CompanyID); err != nil {
			return nil, err
		}
	}
	args := Args{"id": c.d.NewID(), "name": name, "prefix": p.Prefix, "role": string(p.Role), "company": nullable(p.CompanyID),
		"hash": p.TokenHash, "at": p.At, "expires": p.ExpiresAt}
	var out *clasp.OperatorToken
	err := c.d.Write(ctx, func(q Querier) error {
		t, err := ScanOperatorToken(q.QueryRow(ctx, "OperatorTokenInsert", args))
		if c.d.Unique(err) {
			return clasp.Errorf(clasp.CodeAlreadyExists, "An operator token with this secret exists already.")
		}
		out = t
		return Wrap(err, "create operator token")
	})
	return out, err
}

// OperatorTokenGet returns an operator token; 404 not_found.
func (c CRUD) OperatorTokenGet(ctx context.Context, id string) (*clasp.OperatorToken, error) {
	t, err := ScanOperatorToken(c.d.Read().QueryRow(ctx, "OperatorTokenGet", Args{"id": id}))
	if c.d.NoRows(err) {
		return nil, ErrNotFound("operator token", id)
	}
	if err != nil {
		return nil, c.d.Translate(fmt.Errorf("get operator token %s: %w", id, err))
	}
	return t, nil
}

// OperatorTokenFind returns the operator token whose secret has hash
// tokenHash, revoked and expired ones included (the caller judges them,
// clasp.OperatorToken.Usable); 404 not_found when there is none.
func (c CRUD) OperatorTokenFind(ctx context.Context, tokenHash string) (*clasp.OperatorToken, error) {
	t, err := ScanOperatorToken(c.d.Read().QueryRow(ctx, "OperatorTokenByHash", Args{"hash": tokenHash}))
	if c.d.NoRows(err) {
		return nil, ErrNotFound("operator token", "")
	}
	if err != nil {
		return nil, c.d.Translate(fmt.Errorf("find operator token: %w", err))
	}
	return t, nil
}

// OperatorTokenList lists the operator tokens, oldest first: every one
// when companyID is "", else those scoped to that company. Never the
// secrets.
func (c CRUD) OperatorTokenList(ctx context.Context, companyID string) ([]*clasp.OperatorToken, error) {
	ts, err := queryAll(ctx, c.d.Read(), "OperatorTokenList", Args{"company": companyID}, ScanOperatorToken)
	if err != nil {
		return nil, c.d.Translate(fmt.Errorf("list operator tokens: %w", err))
	}
	return ts, nil
}

// OperatorTokenRevoke revokes an operator token at at and ends its board
// sessions; revoking a revoked token answers it unchanged (and still ends
// any session left). 404 not_found.
func (c CRUD) OperatorTokenRevoke(ctx context.Context, id string, at time.Time) (*clasp.OperatorToken, error) {
	var out *clasp.OperatorToken
	err := c.d.Write(ctx, func(q Querier) error {
		t, err := ScanOperatorToken(q.QueryRow(ctx, "OperatorTokenRevoke", Args{"id": id, "at": at}))
		if c.d.NoRows(err) {
			t, err = ScanOperatorToken(q.QueryRow(ctx, "OperatorTokenGet", Args{"id": id}))
			if c.d.NoRows(err) {
				return ErrNotFound("operator token", id)
			}
		}
		if err != nil {
			return Wrap(err, "revoke operator token %s", id)
		}
		out = t
		_, err = q.Exec(ctx, "BoardSessionDeleteToken", Args{"token": id})
		return Wrap(err, "end sessions of operator token %s", id)
	})
	return out, err
}

// OperatorTokenUsed records that token id was used at at; at most one
// write a minute per token (an earlier record less than a minute old is
// kept).
func (c CRUD) OperatorTokenUsed(ctx context.Context, id string, at time.Time) error {
	return c.d.Write(ctx, func(q Querier) error {
		_, err := q.Exec(ctx, "OperatorTokenUsed", Args{"id": id, "at": at})
		return Wrap(err, "record use of operator token %s", id)
	})
}

// BoardSessionCreate opens a board session of token p.TokenID. 404
// not_found when there is no such token.
func (c CRUD) BoardSessionCreate(ctx context.Context, p *BoardSessionCreateParams) error {
	if _, err := c.OperatorTokenGet(ctx, p.TokenID); err != nil {
		return err
	}
	return c.d.Write(ctx, func(q Querier) error {
		_, err := q.Exec(ctx, "BoardSessionInsert", Args{"hash": p.Hash, "token": p.TokenID, "at": p.At, "expires": p.ExpiresAt})
		return Wrap(err, "open board session")
	})
}

// BoardSessionFind returns the board session whose secret has hash
// sessionHash, with its token as it stands (the caller judges expiry and
// revocation); 404 not_found when there is none (never opened, or ended).
func (c CRUD) BoardSessionFind(ctx context.Context, sessionHash string) (*BoardSession, error) {
	var s BoardSession
	var t clasp.OperatorToken
	dest := append([]any{Time(&s.CreatedAt), Time(&s.LastSeenAt), Time(&s.ExpiresAt)}, operatorDest(&t)...)
	err := c.d.Read().QueryRow(ctx, "BoardSessionGet", Args{"hash": sessionHash}).Scan(dest...)
	if c.d.NoRows(err) {
		return nil, ErrNotFound("board session", "")
	}
	if err != nil {
		return nil, c.d.Translate(fmt.Errorf("find board session: %w", err))
	}
	s.Token = &t
	return &s, nil
}

// BoardSessionSeen records that the session was used at at; at most one
// write a minute per session.
func (c CRUD) BoardSessionSeen(ctx context.Context, sessionHash string, at time.Time) error {
	return c.d.Write(ctx, func(q Querier) error {
		_, err := q.Exec(ctx, "BoardSessionSeen", Args{"hash": sessionHash, "at": at})
		return Wrap(err, "record use of board session")
	})
}

// BoardSessionDelete ends a board session; ending one that is gone does
// nothing.
func (c CRUD) BoardSessionDelete(ctx context.Context, sessionHash string) error {
	return c.d.Write(ctx, func(q Querier) error {
		_, err := q.Exec(ctx, "BoardSessionDelete", Args{"hash": sessionHash})
		return Wrap(err, "end board session")
	})
}
