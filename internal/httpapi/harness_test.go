package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/postgres"
	"github.com/clasp-dev/clasp/internal/store/sqlite"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
)

// bundle is one test's server: the real handler on a loopback listener over
// a fresh SQLite file.
type bundle struct {
	t     testing.TB
	st    store.Store
	srv   *Server
	ts    *httptest.Server
	hc    *http.Client
	board string // the board token
	db    string // the SQLite file
	logs  string // Config.RunLogDir: run logs (<runId>.log)
}

// setupOpts tweaks setup.
type setupOpts struct {
	localTrusted    bool
	requireRunToken bool
	leaseTTL        time.Duration
	now             func() time.Time // the clock of store and server; default time.Now
	bodyReadTimeout time.Duration
	// postgres: use a fresh schema on CLASP_TEST_POSTGRES_URL instead of a
	// SQLite file (skips when the variable is unset).
	postgres bool
	// scheduler is Config.Scheduler; nil for none.
	scheduler Scheduler
	// dependencies is Config.Dependencies; nil for none.
	dependencies Dependencies
	// limits is Config.Limits; zero for the defaults.
	limits Limits
	// logger, when set, receives the server's logs.
	logger *slog.Logger
	// webhookAllowPrivate is Config.WebhookAllowPrivate.
	webhookAllowPrivate bool
	// store, when set, is used instead of a new one (a second replica on
	// the same database); setup does not close it.
	store store.Store
}

// setup starts a server for one test and registers its cleanup.
func setup(t testing.TB, opts ...func(*setupOpts)) *bundle {
	t.Helper()
	var o setupOpts
	for _, f := range opts {
		f(&o)
	}
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "clasp.db")
	logs := filepath.Join(t.TempDir(), "run-logs")
	var st store.Store
	if o.store != nil {
		st = o.store
	} else if o.postgres {
		st = openPostgres(t)
	} else {
		d, err := sqlite.Open(ctx, db, sqlite.Options{Synchronous: "NORMAL", Now: o.now})
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		st = store.New(d)
	}
	board, hash := NewToken(TokenBoard)
	if _, err := st.SettingPutIfAbsent(ctx, boardTokenSetting, hash); err != nil {
		t.Fatalf("store board token: %v", err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if o.logger != nil {
		log = o.logger
	}
	srv := New(Config{
		Store:               st,
		Logger:              log,
		LeaseTTL:            o.leaseTTL,
		LocalTrusted:        o.localTrusted,
		RequireRunToken:     o.requireRunToken,
		Registry:            prometheus.NewRegistry(),
		Now:                 o.now,
		BodyReadTimeout:     o.bodyReadTimeout,
		Scheduler:           o.scheduler,
		Dependencies:        o.dependencies,
		RunLogDir:           logs,
		Limits:              o.limits,
		WebhookAllowPrivate: o.webhookAllowPrivate,
	})
	ts := httptest.NewServer(srv.Handler())
	b := &bundle{t: t, st: st, srv: srv, ts: ts, hc: ts.Client(), board: board, db: db, logs: logs}
	t.Cleanup(func() {
		ts.Close()
		if o.store != nil {
			return
		}
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return b
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// resp is an HTTP answer.
type resp struct {
	status int
	header http.Header
	body   []byte
}

// errBody decodes the JSON error body.
func (r *resp) errBody(t testing.TB) errorBody {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", r.body, err)
	}
	return e
}

// req describes one request: auth token ("" = board; noAuth sends none),
// run header, raw body or a value to marshal, extra headers.
type req struct {
	token   string
	noAuth  bool
	run     string
	runHdr  string // header name for run, default X-Clasp-Run-Id
	raw     []byte
	body    any
	headers map[string]string
	host    string
}

// do sends one request and reads the whole answer.
func (b *bundle) do(method, path string, r req) *resp {
	b.t.Helper()
	var rd io.Reader
	switch {
	case r.raw != nil:
		rd = bytes.NewReader(r.raw)
	case r.body != nil:
		data, err := json.Marshal(r.body)
		if err != nil {
			b.t.Fatalf("marshal body: %v", err)
		}
		rd = bytes.NewReader(data)
	}
	hr, err := http.NewRequest(method, b.ts.URL+path, rd)
	if err != nil {
		b.t.Fatalf("new request: %v", err)
	}
	if rd != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if !r.noAuth {
		tok := r.token
		if tok == "" {
			tok = b.board
		}
		hr.Header.Set("Authorization", "Bearer "+tok)
	}
	if r.run != "" {
		h := r.runHdr
		if h == "" {
			h = RunIDHeader
		}
		hr.Header.Set(h, r.run)
	}
	for k, v := range r.headers {
		hr.Header.Set(k, v)
	}
	if r.host != "" {
		hr.Host = r.host
	}
	res, err := b.hc.Do(hr)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		b.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	if res.StatusCode == http.StatusInternalServerError {
		b.t.Errorf("%s %s: status %d: %s", method, path, res.StatusCode, data)
	}
	// Every real answer must match the OpenAPI document.
	checkOpenAPIResponse(b.t, b.srv, hr, res.StatusCode, res.Header, data)
	return &resp{status: res.StatusCode, header: res.Header, body: data}
}

// must sends a request, fails the test unless the status is want, and
// decodes the body into out (if not nil).
func (b *bundle) must(want int, method, path string, r req, out any) *resp {
	b.t.Helper()
	res := b.do(method, path, r)
	if res.status != want {
		b.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, res.status, want, res.body)
	}
	if out != nil {
		if err := json.Unmarshal(res.body, out); err != nil {
			b.t.Fatalf("%s %s: decode %q: %v", method, path, res.body, err)
		}
	}
	return res
}

// wantErr checks an error answer: status, code and (when not "")
// details.field; a 429 must carry Retry-After, whole seconds at least 1,
// equal to details.retryAfterSeconds when that is given.
func wantErr(t testing.TB, r *resp, status int, code, field string) errorBody {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	e := r.errBody(t)
	if e.Code != code {
		t.Errorf("code %q, want %q; body %s", e.Code, code, r.body)
	}
	if e.Details == nil {
		t.Errorf("details is null, want an object; body %s", r.body)
	}
	if e.Error == "" {
		t.Errorf("empty error message; body %s", r.body)
	}
	if field != "" && e.Details["field"] != field {
		t.Errorf("details.field %v, want %q; body %s", e.Details["field"], field, r.body)
	}
	if status == http.StatusTooManyRequests {
		ra, err := strconv.Atoi(r.header.Get("Retry-After"))
		if err != nil || ra < 1 {
			t.Errorf("429 Retry-After %q, want a whole number of seconds, at least 1; body %s", r.header.Get("Retry-After"), r.body)
		} else if d, ok := e.Details["retryAfterSeconds"]; ok && d != float64(ra) {
			t.Errorf("429 Retry-After %d, details.retryAfterSeconds %v: want the same; body %s", ra, d, r.body)
		}
	}
	return e
}

// Fixtures.

func (b *bundle) company(prefix string) *clasp.Company {
	b.t.Helper()
	var c clasp.Company
	b.must(http.StatusCreated, "POST", "/api/companies", req{body: map[string]string{"name": "Co " + prefix, "issuePrefix": prefix}}, &c)
	return &c
}

// operatorToken creates, as the board, an operator token of role in
// company companyID ("" for every company) and returns it with its secret.
func (b *bundle) operatorToken(role, companyID string) *clasp.OperatorToken {
	b.t.Helper()
	body := map[string]any{"name": "op-" + role, "role": role}
	if companyID != "" {
		body["companyId"] = companyID
	}
	var t clasp.OperatorToken
	b.must(http.StatusCreated, "POST", "/api/operators/tokens", req{body: body}, &t)
	return &t
}

// agent creates an agent and one API key; it returns the agent and the key.
func (b *bundle) agent(companyID, name string) (*clasp.Agent, string) {
	b.t.Helper()
	var a clasp.Agent
	b.must(http.StatusCreated, "POST", "/api/companies/"+companyID+"/agents", req{body: map[string]string{"name": name}}, &a)
	var k clasp.APIKey
	b.must(http.StatusCreated, "POST", "/api/agents/"+a.ID+"/keys", req{body: map[string]any{}}, &k)
	if !strings.HasPrefix(k.Token, "clasp_ak_") || k.Prefix != k.Token[:KeyPrefixLen] {
		b.t.Fatalf("key token %q prefix %q: want clasp_ak_... and its first %d characters", k.Token, k.Prefix, KeyPrefixLen)
	}
	return &a, k.Token
}

// run opens a run with an agent key.
func (b *bundle) run(key string) *clasp.Run {
	b.t.Helper()
	var r clasp.Run
	b.must(http.StatusCreated, "POST", "/api/agents/me/runs", req{token: key, body: map[string]any{}}, &r)
	if r.Status != clasp.RunRunning || !strings.HasPrefix(r.RunToken, "clasp_rt_") {
		b.t.Fatalf("opened run %+v: want running with a clasp_rt_ token", r)
	}
	return &r
}

// issue creates an issue as the board.
func (b *bundle) issue(companyID string, fields map[string]any) *clasp.Issue {
	b.t.Helper()
	body := map[string]any{"title": "an issue"}
	for k, v := range fields {
		body[k] = v
	}
	var iss clasp.Issue
	b.must(http.StatusCreated, "POST", "/api/companies/"+companyID+"/issues", req{body: body}, &iss)
	return &iss
}

// getIssue reads an issue as the board.
func (b *bundle) getIssue(ref string) *clasp.Issue {
	b.t.Helper()
	var iss clasp.Issue
	b.must(http.StatusOK, "GET", "/api/issues/"+ref, req{}, &iss)
	return &iss
}

// activity reads an issue's activity as the board (up to 1000 rows).
func (b *bundle) activity(ref string) []*clasp.Activity {
	b.t.Helper()
	var rows []*clasp.Activity
	b.must(http.StatusOK, "GET", "/api/issues/"+ref+"/activity?limit=1000", req{}, &rows)
	return rows
}

// countAction counts rows with the given action.
func countAction(rows []*clasp.Activity, action string) int {
	n := 0
	for _, r := range rows {
		if r.Action == action {
			n++
		}
	}
	return n
}

// checkout sends a checkout as an agent in a run.
func (b *bundle) checkout(issueRef, key, runID, agentID string, statuses ...clasp.IssueStatus) *resp {
	b.t.Helper()
	if len(statuses) == 0 {
		statuses = []clasp.IssueStatus{clasp.IssueTodo}
	}
	return b.do("POST", "/api/issues/"+issueRef+"/checkout", req{token: key, run: runID, body: map[string]any{"agentId": agentID, "expectedStatuses": statuses}})
}

// decode unmarshals a response body.
func decode[T any](t testing.TB, r *resp) *T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
	return &v
}

// sameIssue fails if the issue changed. The workspace of a checkout's
// answer is not part of the issue's row: it is left out.
func sameIssue(t testing.TB, before, after *clasp.Issue) {
	t.Helper()
	if diff := cmp.Diff(before, after, cmpopts.IgnoreFields(clasp.Issue{}, "Workspace")); diff != "" {
		t.Errorf("issue changed (-before +after):\n%s", diff)
	}
}

// world is the usual cast: company C (prefix), agents A and B with keys,
// running runs RA1, RA2 (A) and RB (B).
type world struct {
	c        *clasp.Company
	a, b     *clasp.Agent
	ka, kb   string
	ra1, ra2 *clasp.Run
	rb       *clasp.Run
}

func (b *bundle) world(prefix string) *world {
	b.t.Helper()
	w := &world{c: b.company(prefix)}
	w.a, w.ka = b.agent(w.c.ID, "alpha")
	w.b, w.kb = b.agent(w.c.ID, "beta")
	w.ra1, w.ra2, w.rb = b.run(w.ka), b.run(w.ka), b.run(w.kb)
	return w
}

// openPostgres opens a PostgreSQL store in a fresh schema of the database
// at CLASP_TEST_POSTGRES_URL, dropped at cleanup; it skips without it.
func openPostgres(t testing.TB) store.Store {
	t.Helper()
	st, _ := openPostgresSchema(t)
	return st
}

// openPostgresSchema is openPostgres that also returns a function opening
// another store on the same schema (another replica), closed at cleanup.
func openPostgresSchema(t testing.TB) (store.Store, func() store.Store) {
	t.Helper()
	url := os.Getenv("CLASP_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("CLASP_TEST_POSTGRES_URL is not set: no PostgreSQL to run against")
	}
	ctx := context.Background()
	schema := fmt.Sprintf("httpapi_%d", rand.Int64())
	stDrv, err := postgres.Open(ctx, url, postgres.Options{Schema: schema, MaxConns: 80})
	if err != nil {
		t.Fatalf("open postgres store: %v", err)
	}
	st := store.New(stDrv)
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("cleanup: connect: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("cleanup: drop schema %s: %v", schema, err)
		}
	})
	replica := func() store.Store {
		t.Helper()
		st2Drv, err := postgres.Open(ctx, url, postgres.Options{Schema: schema, MaxConns: 20})
		if err != nil {
			t.Fatalf("open second postgres store: %v", err)
		}
		st2 := store.New(st2Drv)
		t.Cleanup(func() { st2.Close() })
		return st2
	}
	return st, replica
}

// bothStores runs f in two parallel subtests, sqlite and postgres, each on
// a bundle (setup) of that store.
func bothStores(t *testing.T, f func(t *testing.T, b *bundle)) {
	for _, pg := range []bool{false, true} {
		t.Run(map[bool]string{false: "sqlite", true: "postgres"}[pg], func(t *testing.T) {
			t.Parallel()
			f(t, setup(t, func(o *setupOpts) { o.postgres = pg }))
		})
	}
}
