package storetest

import (
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// testOperatorTokens pins operator tokens: created with a name, role and
// scope, found by hash (revoked ones too, for the caller to refuse),
// listed by scope, revoked once (a second revoke answers it unchanged),
// and their last use recorded at most once a minute.
func testOperatorTokens(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	other := newCompany(t, e.st, "OTHER")
	at := time.Now().UTC().Truncate(time.Millisecond)
	exp := at.Add(24 * time.Hour)
	h := newTokenHash()
	admin, err := e.st.OperatorTokenCreate(ctx, &store.OperatorTokenCreateParams{Name: "ada", Role: clasp.RoleAdmin, TokenHash: newTokenHash(), Prefix: "clasp_ot_aaaaaaaa", At: at})
	if err != nil {
		t.Fatalf("create admin token: %v", err)
	}
	if admin.CompanyID != nil || admin.Role != clasp.RoleAdmin || admin.Name != "ada" || admin.ExpiresAt != nil || admin.RevokedAt != nil {
		t.Errorf("admin token: got %+v, want unscoped admin ada, no expiry", admin)
	}
	v, err := e.st.OperatorTokenCreate(ctx, &store.OperatorTokenCreateParams{Name: "vic", Role: clasp.RoleViewer, CompanyID: e.co.ID, TokenHash: h, Prefix: "clasp_ot_bbbbbbbb", ExpiresAt: &exp, At: at})
	if err != nil {
		t.Fatalf("create viewer token: %v", err)
	}
	if v.CompanyID == nil || *v.CompanyID != e.co.ID || v.ExpiresAt == nil || !v.ExpiresAt.Equal(exp) || !v.CreatedAt.Equal(at) {
		t.Errorf("viewer token: got %+v, want scoped to %s, expiring %v, created %v", v, e.co.ID, exp, at)
	}
	if _, err := e.st.OperatorTokenCreate(ctx, &store.OperatorTokenCreateParams{Name: "o", Role: clasp.RoleOperator, CompanyID: other.ID, TokenHash: newTokenHash(), Prefix: "p", At: at}); err != nil {
		t.Fatalf("create operator of OTHER: %v", err)
	}
	_, err = e.st.OperatorTokenCreate(ctx, &store.OperatorTokenCreateParams{Name: "dup", Role: clasp.RoleViewer, TokenHash: h, Prefix: "p", At: at})
	wantCode(t, "same hash twice", err, clasp.CodeAlreadyExists)
	_, err = e.st.OperatorTokenCreate(ctx, &store.OperatorTokenCreateParams{Name: "x", Role: "root", TokenHash: newTokenHash(), Prefix: "p", At: at})
	wantCode(t, "unknown role", err, clasp.CodeInvalidRequest)
	_, err = e.st.OperatorTokenCreate(ctx, &store.OperatorTokenCreateParams{Name: " ", Role: clasp.RoleViewer, TokenHash: newTokenHash(), Prefix: "p", At: at})
	wantCode(t, "empty name", err, clasp.CodeInvalidRequest)
	_, err = e.st.OperatorTokenCreate(ctx, &store.OperatorTokenCreateParams{Name: "x", Role: clasp.RoleViewer, CompanyID: "00000000-0000-4000-8000-000000000000", TokenHash: newTokenHash(), Prefix: "p", At: at})
	wantCode(t, "unknown company", err, clasp.CodeNotFound)

	got, err := e.st.OperatorTokenFind(ctx, h)
	if err != nil || got.ID != v.ID {
		t.Fatalf("find by hash: got %+v, %v, want %s", got, err, v.ID)
	}
	_, err = e.st.OperatorTokenFind(ctx, newTokenHash())
	wantCode(t, "find unknown hash", err, clasp.CodeNotFound)
	all, err := e.st.OperatorTokenList(ctx, "")
	if err != nil || len(all) != 3 {
		t.Fatalf("list all: got %d, %v, want 3", len(all), err)
	}
	mine, err := e.st.OperatorTokenList(ctx, e.co.ID)
	if err != nil || len(mine) != 1 || mine[0].ID != v.ID {
		t.Fatalf("list of ACME: got %v, %v, want only %s", mine, err, v.ID)
	}

	if err := e.st.OperatorTokenUsed(ctx, v.ID, at); err != nil {
		t.Fatalf("used: %v", err)
	}
	if err := e.st.OperatorTokenUsed(ctx, v.ID, at.Add(30*time.Second)); err != nil {
		t.Fatalf("used again: %v", err)
	}
	got, _ = e.st.OperatorTokenGet(ctx, v.ID)
	if got.LastUsedAt == nil || !got.LastUsedAt.Equal(at) {
		t.Errorf("lastUsedAt after two uses 30 s apart: got %v, want %v (one write a minute)", got.LastUsedAt, at)
	}

	r, err := e.st.OperatorTokenRevoke(ctx, v.ID, at.Add(time.Minute))
	if err != nil || r.RevokedAt == nil || !r.RevokedAt.Equal(at.Add(time.Minute)) {
		t.Fatalf("revoke: got %+v, %v, want revokedAt %v", r, err, at.Add(time.Minute))
	}
	again, err := e.st.OperatorTokenRevoke(ctx, v.ID, at.Add(2*time.Minute))
	if err != nil || again.RevokedAt == nil || !again.RevokedAt.Equal(*r.RevokedAt) {
		t.Errorf("revoke again: got %+v, %v, want it unchanged", again, err)
	}
	_, err = e.st.OperatorTokenRevoke(ctx, "00000000-0000-4000-8000-000000000000", at)
	wantCode(t, "revoke unknown token", err, clasp.CodeNotFound)
	got, err = e.st.OperatorTokenFind(ctx, h)
	if err != nil || got.Usable(at) {
		t.Errorf("revoked token by hash: got %+v, %v, want found and not usable", got, err)
	}
}

// testBoardSessions pins board sessions: opened for a token, found with
// the token as it stands, ended by sign-out and by the token's
// revocation.
func testBoardSessions(t *testing.T, open opener) {
	st, _ := open(t)
	ctx := t.Context()
	at := time.Now().UTC().Truncate(time.Millisecond)
	tok, err := st.OperatorTokenCreate(ctx, &store.OperatorTokenCreateParams{Name: "ada", Role: clasp.RoleOperator, TokenHash: newTokenHash(), Prefix: "p", At: at})
	if err != nil {
		t.Fatal(err)
	}
	s1, s2 := newTokenHash(), newTokenHash()
	for _, h := range []string{s1, s2} {
		if err := st.BoardSessionCreate(ctx, &store.BoardSessionCreateParams{Hash: h, TokenID: tok.ID, At: at, ExpiresAt: at.Add(time.Hour)}); err != nil {
			t.Fatalf("open session: %v", err)
		}
	}
	err = st.BoardSessionCreate(ctx, &store.BoardSessionCreateParams{Hash: newTokenHash(), TokenID: "00000000-0000-4000-8000-000000000000", At: at, ExpiresAt: at})
	wantCode(t, "session of unknown token", err, clasp.CodeNotFound)
	s, err := st.BoardSessionFind(ctx, s1)
	if err != nil || s.Token.ID != tok.ID || !s.CreatedAt.Equal(at) || !s.LastSeenAt.Equal(at) || !s.ExpiresAt.Equal(at.Add(time.Hour)) {
		t.Fatalf("find session: got %+v, %v, want token %s, times %v", s, err, tok.ID, at)
	}
	if err := st.BoardSessionSeen(ctx, s1, at.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if s, _ = st.BoardSessionFind(ctx, s1); !s.LastSeenAt.Equal(at.Add(2 * time.Minute)) {
		t.Errorf("lastSeenAt: got %v, want %v", s.LastSeenAt, at.Add(2*time.Minute))
	}
	if err := st.BoardSessionDelete(ctx, s1); err != nil {
		t.Fatal(err)
	}
	_, err = st.BoardSessionFind(ctx, s1)
	wantCode(t, "signed-out session", err, clasp.CodeNotFound)
	if err := st.BoardSessionDelete(ctx, s1); err != nil {
		t.Errorf("end an ended session: %v, want nil", err)
	}
	if _, err := st.BoardSessionFind(ctx, s2); err != nil {
		t.Fatalf("other session after sign-out: %v", err)
	}
	if _, err := st.OperatorTokenRevoke(ctx, tok.ID, at); err != nil {
		t.Fatal(err)
	}
	_, err = st.BoardSessionFind(ctx, s2)
	wantCode(t, "session of a revoked token", err, clasp.CodeNotFound)
}
