package board_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clasp-dev/clasp/internal/board"
	"github.com/clasp-dev/clasp/internal/httpapi"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/sqlite"
)

// newBoard serves the board in front of the real API on a real SQLite
// file, and returns its URL and board token.
func newBoard(t *testing.T, cfg board.Config) (string, string) {
	t.Helper()
	ctx := context.Background()
	stDrv, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "clasp.db"), sqlite.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(stDrv)
	t.Cleanup(func() { st.Close() })
	token, hash := httpapi.NewToken(httpapi.TokenBoard)
	if _, err := st.SettingPutIfAbsent(ctx, "board_token_hash", hash); err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(httpapi.Config{Store: st, LocalTrusted: cfg.LocalTrusted})
	cfg.API = api.Handler()
	b, err := board.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(func() { api.BeginShutdown(); srv.Close() })
	return srv.URL, token
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func do(t *testing.T, method, u string, body string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(b)
}

// signIn signs in on the board with token and returns the cookie header
// of the signed-in browser.
func signIn(t *testing.T, u, token string) map[string]string {
	t.Helper()
	res, body := do(t, "POST", u+"/login", url.Values{"token": {token}}.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 {
		t.Fatalf("sign in: %d cookies=%v %s", res.StatusCode, res.Cookies(), body)
	}
	return map[string]string{"Cookie": board.CookieName + "=" + res.Cookies()[0].Value}
}

// TestSignInCookie: a page without the cookie redirects to /login; a bad
// token gets the form back with 401 and no cookie; the board token opens a
// board session whose secret, never the token, is the HttpOnly,
// SameSite=Strict cookie (not Secure over plain HTTP) that the pages and
// the API then accept; sign-out ends the session on the server, so the
// cookie's value works nowhere after it; a cookie holding the token itself
// is not accepted.
func TestSignInCookie(t *testing.T) {
	u, token := newBoard(t, board.Config{})
	res, _ := do(t, "GET", u+"/", "", nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" {
		t.Fatalf("GET / without cookie: %d %q, want 303 to /login", res.StatusCode, res.Header.Get("Location"))
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "object-src 'none'") {
		t.Fatalf("CSP = %q", csp)
	}
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	res, body := do(t, "POST", u+"/login", url.Values{"token": {"clasp_bt_wrong"}}.Encode(), form)
	if res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "not the board token") || len(res.Cookies()) != 0 {
		t.Fatalf("bad token: %d cookies=%v body has message=%v", res.StatusCode, res.Cookies(), strings.Contains(body, "not the board token"))
	}
	res, _ = do(t, "POST", u+"/login", url.Values{"token": {token}}.Encode(), form)
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 {
		t.Fatalf("good token: %d cookies=%v", res.StatusCode, res.Cookies())
	}
	c := res.Cookies()[0]
	if c.Name != board.CookieName || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure {
		t.Fatalf("cookie = %+v, want HttpOnly SameSite=Strict, not Secure over HTTP", c)
	}
	if c.Value == token || strings.Contains(c.Value, token[:20]) || !strings.HasPrefix(c.Value, "clasp_bs_") {
		t.Fatalf("cookie value %.14s...: want a board session secret, not the token", c.Value)
	}
	cookie := map[string]string{"Cookie": board.CookieName + "=" + c.Value}
	if res, _ := do(t, "GET", u+"/api/companies", "", cookie); res.StatusCode != 200 {
		t.Fatalf("GET /api/companies with the cookie: %d", res.StatusCode)
	}
	if res, body := do(t, "GET", u+"/", "", cookie); res.StatusCode != 200 || !strings.Contains(body, "No company") {
		t.Fatalf("GET / signed in: %d", res.StatusCode)
	}
	res, _ = do(t, "POST", u+"/logout", "", cookie)
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 || res.Cookies()[0].MaxAge >= 0 {
		t.Fatalf("logout: %d %v", res.StatusCode, res.Cookies())
	}
	// A copy of the cookie kept after sign-out opens nothing.
	if res, _ := do(t, "GET", u+"/api/companies", "", cookie); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("API with the cookie after sign-out: %d, want 401", res.StatusCode)
	}
	if res, _ := do(t, "GET", u+"/api/companies", "", map[string]string{"Authorization": "Bearer " + c.Value}); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the session secret as a bearer after sign-out: %d, want 401", res.StatusCode)
	}
	if res, _ := do(t, "GET", u+"/", "", cookie); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" {
		t.Fatalf("page with the cookie after sign-out: %d, want 303 to /login", res.StatusCode)
	}
	// A cookie holding the token itself is no sign-in.
	raw := map[string]string{"Cookie": board.CookieName + "=" + token}
	if res, _ := do(t, "GET", u+"/", "", raw); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("page with the token as cookie: %d, want 303 to /login", res.StatusCode)
	}
	if res, _ := do(t, "GET", u+"/api/companies", "", raw); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("API with the token as cookie: %d, want 401", res.StatusCode)
	}
}

// wantRequestID checks that the JSON error body of res names its request
// as every API error does (RULES.md, Errors and requests): a
// details.requestId equal to the X-Request-Id header, and want when the
// request sent one.
func wantRequestID(t *testing.T, what string, res *http.Response, body, want string) {
	t.Helper()
	var e struct {
		Details map[string]any `json:"details"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("%s: body %q is not JSON: %v", what, body, err)
	}
	rid, _ := e.Details["requestId"].(string)
	if rid == "" || rid != res.Header.Get("X-Request-Id") || want != "" && rid != want {
		t.Errorf("%s: details.requestId %q, X-Request-Id %q; want the same non-empty id (%q when sent)", what, rid, res.Header.Get("X-Request-Id"), want)
	}
}

// TestCookieWritesAreSameOriginOnly: a write that carries the board cookie
// from another origin is refused (403, nothing created); the same write
// from the page's origin goes through the API. The refusal names its
// request id as the API's errors do.
func TestCookieWritesAreSameOriginOnly(t *testing.T) {
	u, token := newBoard(t, board.Config{})
	hdr := signIn(t, u, token)
	hdr["Content-Type"], hdr["Origin"], hdr["Sec-Fetch-Site"] = "application/json", "https://evil.example", "cross-site"
	res, body := do(t, "POST", u+"/api/companies", `{"name":"Evil","issuePrefix":"EVL"}`, hdr)
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, `"code":"forbidden"`) {
		t.Fatalf("cross-origin write: %d %s, want 403 forbidden", res.StatusCode, body)
	}
	wantRequestID(t, "cross-origin write", res, body, "")
	hdr["X-Request-Id"] = "caller-id-1"
	res, body = do(t, "POST", u+"/api/companies", `{"name":"Evil","issuePrefix":"EVL"}`, hdr)
	wantRequestID(t, "cross-origin write with X-Request-Id", res, body, "caller-id-1")
	delete(hdr, "X-Request-Id")
	_, list := do(t, "GET", u+"/api/companies", "", map[string]string{"Authorization": "Bearer " + token})
	if strings.Contains(list, "Evil") {
		t.Fatalf("the refused write created a company: %s", list)
	}
	hdr["Origin"], hdr["Sec-Fetch-Site"] = u, "same-origin"
	if res, body := do(t, "POST", u+"/api/companies", `{"name":"Good","issuePrefix":"GOO"}`, hdr); res.StatusCode != http.StatusCreated {
		t.Fatalf("same-origin write: %d %s, want 201", res.StatusCode, body)
	}
}

// TestReadOnly: with ReadOnly the pages carry no action forms or buttons
// and a write from the board's browser is refused with 403, while a
// bearer-token client of the API is unaffected.
func TestReadOnly(t *testing.T) {
	u, token := newBoard(t, board.Config{ReadOnly: true})
	bearer := map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json"}
	if res, body := do(t, "POST", u+"/api/companies", `{"name":"Acme","issuePrefix":"ACM"}`, bearer); res.StatusCode != http.StatusCreated {
		t.Fatalf("API client write: %d %s", res.StatusCode, body)
	}
	cookie := signIn(t, u, token)
	cookie["Content-Type"], cookie["Origin"], cookie["Sec-Fetch-Site"] = "application/json", u, "same-origin"
	res, body := do(t, "POST", u+"/api/companies", `{"name":"Other","issuePrefix":"OTH"}`, cookie)
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "read-only") {
		t.Fatalf("board write in read-only mode: %d %s, want 403", res.StatusCode, body)
	}
	wantRequestID(t, "board write in read-only mode", res, body, "")
	for _, p := range []string{"/", "/agents", "/runs"} {
		res, body := do(t, "GET", u+p, "", cookie)
		if res.StatusCode != 200 || strings.Contains(body, `class="action`) || !strings.Contains(body, "read-only") {
			t.Fatalf("GET %s read-only: %d, has actions=%v", p, res.StatusCode, strings.Contains(body, `class="action`))
		}
	}
}

// TestLocalTrustedNeedsNoSignIn: in local-trusted mode the pages open
// without a cookie (a loopback Host) and /login sends to /.
func TestLocalTrustedNeedsNoSignIn(t *testing.T) {
	u, _ := newBoard(t, board.Config{LocalTrusted: true})
	if res, body := do(t, "GET", u+"/", "", nil); res.StatusCode != 200 || strings.Contains(body, "Sign out") {
		t.Fatalf("GET / local-trusted: %d", res.StatusCode)
	}
	if res, _ := do(t, "GET", u+"/login", "", nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("GET /login local-trusted: %d, want 303", res.StatusCode)
	}
}

// TestUnknownIssuePageIs404: an issue page for an identifier or UUID that
// names no issue answers 404, and one for a reference that cannot be an
// issue's 400, as the API answers, with the API's message on a page, never
// a 500 from rendering the issue template without its issue.
func TestUnknownIssuePageIs404(t *testing.T) {
	u, _ := newBoard(t, board.Config{LocalTrusted: true})
	res, body := do(t, "POST", u+"/api/companies", `{"name":"Acme","issuePrefix":"ACME"}`, map[string]string{"Content-Type": "application/json"})
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("create company: %d %s", res.StatusCode, body)
	}
	for ref, want := range map[string]int{"ACME-999": 404, "NOPE-1": 404, "0194c5a0-0000-7000-8000-000000000000": 404, "%ff": 400, "not-an-issue": 400} {
		res, body := do(t, "GET", u+"/issues/"+ref, "", nil)
		if res.StatusCode != want {
			t.Errorf("GET /issues/%s: %d, want %d\n%s", ref, res.StatusCode, want, body)
			continue
		}
		if !strings.Contains(body, `role="alert"`) || !strings.Contains(body, "Back to the board") {
			t.Errorf("GET /issues/%s: the %d page shows no message or no way back:\n%s", ref, want, body)
		}
	}
}

// operatorToken creates an operator token through the API as the board
// token and returns its secret.
func operatorToken(t *testing.T, u, board, role, companyID string) string {
	t.Helper()
	body := `{"name":"op","role":"` + role + `"`
	if companyID != "" {
		body += `,"companyId":"` + companyID + `"`
	}
	res, out := do(t, "POST", u+"/api/operators/tokens", body+"}", map[string]string{"Authorization": "Bearer " + board, "Content-Type": "application/json"})
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("create operator token: %d %s", res.StatusCode, out)
	}
	var tok struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(out), &tok); err != nil {
		t.Fatal(err)
	}
	return tok.Token
}

// company creates a company through the API and returns its id.
func company(t *testing.T, u, board, name, prefix string) string {
	t.Helper()
	res, out := do(t, "POST", u+"/api/companies", `{"name":"`+name+`","issuePrefix":"`+prefix+`"}`, map[string]string{"Authorization": "Bearer " + board, "Content-Type": "application/json"})
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("create company: %d %s", res.StatusCode, out)
	}
	var co struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal([]byte(out), &co)
	return co.ID
}

// TestOperatorsOnTheBoard: signed in with a viewer token, the pages show
// no actions and the board's writes are refused (403); signed in with a
// token scoped to company A, the pages list A alone and another company's
// page answers as a company that does not exist; revoking the token ends
// its board session.
func TestOperatorsOnTheBoard(t *testing.T) {
	u, token := newBoard(t, board.Config{})
	a := company(t, u, token, "Alpha", "ALPHA")
	bID := company(t, u, token, "Beta", "BETA")

	viewer := signIn(t, u, operatorToken(t, u, token, "viewer", ""))
	for _, p := range []string{"/", "/agents", "/runs", "/locks", "/activity"} {
		res, body := do(t, "GET", u+p, "", viewer)
		if res.StatusCode != 200 || strings.Contains(body, `class="action`) || !strings.Contains(body, "read-only") {
			t.Errorf("GET %s as a viewer: %d, has actions=%v, want 200 with none", p, res.StatusCode, strings.Contains(body, `class="action`))
		}
	}
	viewer["Content-Type"], viewer["Origin"], viewer["Sec-Fetch-Site"] = "application/json", u, "same-origin"
	if res, body := do(t, "POST", u+"/api/companies/"+a+"/issues", `{"title":"no"}`, viewer); res.StatusCode != http.StatusForbidden || !strings.Contains(body, "read-only") {
		t.Errorf("viewer's write from the board: %d %s, want 403 read-only", res.StatusCode, body)
	}

	scopedTok := operatorToken(t, u, token, "operator", a)
	scoped := signIn(t, u, scopedTok)
	res, body := do(t, "GET", u+"/", "", scoped)
	if res.StatusCode != 200 || !strings.Contains(body, "Alpha") || strings.Contains(body, "Beta") {
		t.Errorf("board of an operator of Alpha: %d, shows Alpha=%v Beta=%v; want Alpha alone", res.StatusCode, strings.Contains(body, "Alpha"), strings.Contains(body, "Beta"))
	}
	resB, _ := do(t, "GET", u+"/?company="+bID, "", scoped)
	resX, _ := do(t, "GET", u+"/?company=00000000-0000-4000-8000-000000000000", "", scoped)
	if resB.StatusCode != http.StatusNotFound || resX.StatusCode != resB.StatusCode {
		t.Errorf("another company's board page: %d, an unknown company's %d; want 404 for both", resB.StatusCode, resX.StatusCode)
	}
	if res, _ := do(t, "GET", u+"/api/companies/"+bID+"/issues", "", scoped); res.StatusCode != http.StatusNotFound {
		t.Errorf("another company's issues through the board: %d, want 404", res.StatusCode)
	}

	// Revoking the token ends its session.
	res, out := do(t, "GET", u+"/api/operators/me", "", scoped)
	var me struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &me); err != nil || res.StatusCode != 200 {
		t.Fatalf("operators/me: %d %s", res.StatusCode, out)
	}
	if res, out := do(t, "DELETE", u+"/api/operators/tokens/"+me.ID, "", map[string]string{"Authorization": "Bearer " + token}); res.StatusCode != 200 {
		t.Fatalf("revoke: %d %s", res.StatusCode, out)
	}
	if res, _ := do(t, "GET", u+"/", "", scoped); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" {
		t.Errorf("board page after the token's revocation: %d, want 303 to /login", res.StatusCode)
	}
}

// TestSecureCookieBehindTrustedProxy: the session cookie is Secure when a
// trusted proxy says X-Forwarded-Proto: https, and not when an untrusted
// client says it.
func TestSecureCookieBehindTrustedProxy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		proxies []netip.Prefix
		want    bool
	}{
		{"trusted proxy", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}, true},
		{"untrusted client", nil, false},
	} {
		u, token := newBoard(t, board.Config{TrustedProxies: tc.proxies})
		res, _ := do(t, "POST", u+"/login", url.Values{"token": {token}}.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded", "X-Forwarded-Proto": "https"})
		if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 || res.Cookies()[0].Secure != tc.want {
			t.Errorf("%s: sign-in %d cookies %v, want Secure=%v", tc.name, res.StatusCode, res.Cookies(), tc.want)
		}
	}
}
