package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// TestOperatorTokenCommands: on a real server, the board token (an admin)
// creates a viewer token that reads and is refused writes, lists it and
// revokes it (401 from then on); clasp board-token rotate replaces the
// board token in <data-dir>/board-token, the old one answers 401, and the
// next start reads the new one back.
func TestOperatorTokenCommands(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	info, _, stop := startServer(t, dir)
	env := map[string]string{EnvURL: info.URL, EnvToken: info.BoardToken}

	r := runCLI(t, env, "", "operator", "token", "create", "dashboard", "--role", "viewer", "--expires", "24h", "--json")
	if r.code != 0 {
		t.Fatalf("token create: %d %s", r.code, r.stderr)
	}
	var v clasp.OperatorToken
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || !strings.HasPrefix(v.Token, "clasp_ot_") || v.Role != clasp.RoleViewer || v.ExpiresAt == nil {
		t.Fatalf("token create answer %q: %v, want a viewer clasp_ot_ token with an expiry", r.stdout, err)
	}
	viewerEnv := map[string]string{EnvURL: info.URL, EnvToken: v.Token}
	if r := runCLI(t, viewerEnv, "", "company", "list"); r.code != 0 {
		t.Errorf("viewer company list: %d %s", r.code, r.stderr)
	}
	if r := runCLI(t, viewerEnv, "", "company", "create", "Nope", "--prefix", "NOPE"); r.code != 1 || !strings.Contains(r.stderr, "403") && !strings.Contains(r.stderr, "forbidden") && !strings.Contains(r.stderr, "read-only") {
		t.Errorf("viewer company create: %d %q, want refused", r.code, r.stderr)
	}
	if r := runCLI(t, viewerEnv, "", "operator", "me"); r.code != 0 || !strings.Contains(r.stdout, "viewer") {
		t.Errorf("operator me as the viewer: %d %q", r.code, r.stdout)
	}
	r = runCLI(t, env, "", "operator", "token", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "dashboard") || !strings.Contains(r.stdout, "board") || strings.Contains(r.stdout, v.Token) {
		t.Errorf("token list: %d\n%s", r.code, r.stdout)
	}
	if r := runCLI(t, env, "", "operator", "token", "revoke", v.ID); r.code != 0 {
		t.Fatalf("token revoke: %d %s", r.code, r.stderr)
	}
	if r := runCLI(t, viewerEnv, "", "company", "list"); r.code != 1 || !strings.Contains(r.stderr, "revoked") {
		t.Errorf("revoked viewer company list: %d %q, want 401", r.code, r.stderr)
	}

	// Rotate the board token through its file.
	r = runCLI(t, map[string]string{EnvURL: info.URL}, "", "board-token", "rotate", "--data-dir", dir)
	if r.code != 0 {
		t.Fatalf("board-token rotate: %d %s", r.code, r.stderr)
	}
	b, _ := os.ReadFile(info.BoardTokenFile)
	newTok := strings.TrimSpace(string(b))
	if newTok == info.BoardToken || !strings.HasPrefix(newTok, "clasp_ot_") || !strings.Contains(r.stdout, newTok) {
		t.Fatalf("board token file after rotate holds %.12s...; want a new token, printed", newTok)
	}
	ctx := context.Background()
	if _, err := client.New(info.URL, client.WithToken(info.BoardToken)).CompanyList(ctx, client.ListParams{}); clasp.ErrorCode(err) != clasp.CodeUnauthenticated {
		t.Errorf("old board token after rotate: %v, want unauthenticated", err)
	}
	me, err := client.New(info.URL, client.WithToken(newTok)).OperatorMe(ctx)
	if err != nil || me.Role != clasp.RoleAdmin || me.Name != "board" || me.CompanyID != nil {
		t.Errorf("new board token: %+v, %v, want the admin \"board\" of every company", me, err)
	}
	stop()
	info2, banner, _ := startServer(t, dir)
	if info2.BoardToken != newTok || !strings.Contains(banner.String(), "board token: in ") {
		t.Errorf("restart after rotate: BoardToken %.12s..., banner:\n%s", info2.BoardToken, banner.String())
	}
}
