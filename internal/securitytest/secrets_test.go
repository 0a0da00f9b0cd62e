package securitytest

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
	"github.com/clasp-dev/clasp/internal/httpapi"
	"github.com/clasp-dev/clasp/internal/secret"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/postgres"
	"github.com/clasp-dev/clasp/internal/store/sqlite"
	"github.com/prometheus/client_golang/prometheus"
)

// unmasked matches a clasp credential whose secret is still there.
var unmasked = regexp.MustCompile(`clasp_(ak|rt|bt)_(?:[A-Za-z0-9_-]{2,})`)

// TestRunLogMasksCredentials: a managed agent that prints its own run
// token (under both names), an API key split across two writes, the board
// token (read from its file: same uid) and a credential of the earlier
// format leaves none of them in its run log. On the old code the log held
// them all.
func TestRunLogMasksCredentials(t *testing.T) {
	t.Parallel()
	s := startServer(t, serveOpts{})
	key := secret.New(secret.AgentKey)
	legacy := "clasp_bt_" + strings.Repeat("Lg", 21) + "x"
	script := `echo "own: $CLASP_API_KEY"
echo "paperclip: $PAPERCLIP_API_KEY"
printf 'split: %s' "$KEY_HEAD"; sleep 0.2; printf '%s\n' "$KEY_TAIL"
echo "board: $(cat "$DATA_DIR/board-token")"
echo "legacy: $LEGACY"
printf 'last: %s' "$CLASP_API_KEY"`
	ag := s.managedAgent(t, script, map[string]string{"DATA_DIR": s.DataDir, "KEY_HEAD": key[:20], "KEY_TAIL": key[20:], "LEGACY": legacy})
	runID := s.wake(t, ag)
	if r := s.waitRun(t, runID); r.Status != clasp.RunSucceeded {
		t.Fatalf("run ended %s; log:\n%s", r.Status, s.runLog(t, runID))
	}
	log := s.runLog(t, runID)
	if m := unmasked.FindAllString(log, -1); len(m) > 0 || strings.Contains(log, s.BoardToken) || strings.Contains(log, key[20:]) {
		t.Errorf("the run log holds credentials %q:\n%s", m, log)
	}
	for _, want := range []string{"own: clasp_rt_[masked]", "paperclip: clasp_rt_[masked]", "split: clasp_ak_[masked]",
		"board: clasp_bt_[masked]", "legacy: clasp_bt_[masked]", "last: clasp_rt_[masked]"} {
		if !strings.Contains(log, want) {
			t.Errorf("the run log lacks %q:\n%s", want, log)
		}
	}
}

// lookupCounter is a real store that counts the lookups authentication
// makes (board token setting, agent keys, run tokens).
type lookupCounter struct {
	store.Store
	n atomic.Int64
}

func (c *lookupCounter) SettingGet(ctx context.Context, key string) (string, error) {
	c.n.Add(1)
	return c.Store.SettingGet(ctx, key)
}

func (c *lookupCounter) AgentAuthenticate(ctx context.Context, hash string) (*clasp.Agent, error) {
	c.n.Add(1)
	return c.Store.AgentAuthenticate(ctx, hash)
}

func (c *lookupCounter) AgentAuthenticateRun(ctx context.Context, hash, runID string, minRenew time.Duration) (*clasp.Agent, *clasp.Run, error) {
	c.n.Add(1)
	return c.Store.AgentAuthenticateRun(ctx, hash, runID, minRenew)
}

func (c *lookupCounter) RunAuthenticate(ctx context.Context, hash string) (*clasp.Agent, *clasp.Run, error) {
	c.n.Add(1)
	return c.Store.RunAuthenticate(ctx, hash)
}

// TestMalformedKeyRefusedWithoutLookup: a mistyped, truncated or padded
// clasp credential is refused (401 unauthenticated) without any store
// lookup; a well-formed unknown one is looked up (and refused). Both
// stores. On the old code every clasp_-prefixed string was looked up.
func TestMalformedKeyRefusedWithoutLookup(t *testing.T) {
	t.Parallel()
	storeKinds(t, func(t *testing.T, databaseURL string) {
		ctx := context.Background()
		var d store.Driver
		var err error
		if databaseURL == "" {
			d, err = sqlite.Open(ctx, filepath.Join(t.TempDir(), "clasp.db"), sqlite.Options{Synchronous: "NORMAL"})
		} else {
			d, err = postgres.Open(ctx, databaseURL, postgres.Options{MaxConns: 4})
		}
		if err != nil {
			t.Fatal(err)
		}
		st := store.New(d)
		t.Cleanup(func() { st.Close() })
		cs := &lookupCounter{Store: st}
		api := httpapi.New(httpapi.Config{Store: cs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: prometheus.NewRegistry()})
		ts := httptest.NewServer(api.Handler())
		t.Cleanup(ts.Close)

		good := secret.New(secret.AgentKey)
		typo := good[:30] + flip(good[30]) + good[31:]
		for _, c := range []struct {
			name, token string
			lookups     bool
		}{
			{"typo", typo, false},
			{"truncated", good[:len(good)-1], false},
			{"padded", good + "x", false},
			{"bad-char", good[:len(good)-7] + "!" + good[len(good)-6:], false},
			{"typo-run-token", "clasp_rt_" + typo[9:], false},
			{"typo-board-token", "clasp_bt_" + typo[9:], false},
			{"typo-gate-token", "clasp_gt_" + typo[9:], false},
			{"well-formed-unknown", good, true},
			{"legacy-unknown", "clasp_ak_" + strings.Repeat("k", 43), true},
		} {
			before := cs.n.Load()
			_, err := client.New(ts.URL, client.WithToken(c.token)).Me(ctx)
			if clasp.ErrorCode(err) != clasp.CodeUnauthenticated {
				t.Errorf("%s: GET /api/agents/me answered %v, want 401 unauthenticated", c.name, err)
			}
			if looked := cs.n.Load() > before; looked != c.lookups {
				t.Errorf("%s (%q): store lookups made: %v, want %v", c.name, c.token, looked, c.lookups)
			}
		}
	})
}

// flip is another base64url character than c.
func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}

// TestLegacyKeysKeepWorking: an agent key and a board token of the earlier
// format (clasp_<kind>_<43 characters>, no id or checksum), stored as
// their hashes as the earlier servers did, still authenticate; new keys
// have the current format and their id as display prefix. Both stores.
func TestLegacyKeysKeepWorking(t *testing.T) {
	t.Parallel()
	storeKinds(t, func(t *testing.T, databaseURL string) {
		ctx := context.Background()
		s := startServer(t, serveOpts{DatabaseURL: databaseURL})
		b := s.board()
		co, err := b.CompanyCreate(ctx, client.CompanyCreateRequest{Name: "Legacy", IssuePrefix: prefix()})
		if err != nil {
			t.Fatal(err)
		}
		ag, err := b.AgentCreate(ctx, co.ID, client.AgentCreateRequest{Name: "old"})
		if err != nil {
			t.Fatal(err)
		}
		k, err := b.AgentKeyCreate(ctx, ag.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, f := secret.Check(k.Token); f != secret.Current || k.Prefix != secret.ID(k.Token) {
			t.Errorf("new key %q (prefix %q): want the current format with its id as prefix", k.Token, k.Prefix)
		}

		// A key of the earlier format, written to the store as an earlier server did.
		legacy := "clasp_ak_" + strings.Repeat("0", 20) + randHex(11) + "_"
		var d store.Driver
		if databaseURL == "" {
			d, err = sqlite.Open(ctx, filepath.Join(s.DataDir, "clasp.db"), sqlite.Options{})
		} else {
			d, err = postgres.Open(ctx, databaseURL, postgres.Options{MaxConns: 2})
		}
		if err != nil {
			t.Fatal(err)
		}
		st := store.New(d)
		_, err = st.AgentKeyCreate(ctx, &store.AgentKeyCreateParams{AgentID: ag.ID, Prefix: legacy[:12], TokenHash: secret.Hash(legacy),
			Actor: store.Actor{Type: clasp.ActorBoard}})
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		if _, f := secret.Check(legacy); f != secret.Legacy {
			t.Fatalf("test key %q is not of the legacy form", legacy)
		}
		for _, tok := range []string{legacy, k.Token} {
			me, err := client.New(s.URL, client.WithToken(tok)).Me(ctx)
			if err != nil || me.ID != ag.ID {
				t.Errorf("GET /api/agents/me with %q: %+v, %v; want agent %s", tok[:12], me, err, ag.ID)
			}
		}
	})
}
