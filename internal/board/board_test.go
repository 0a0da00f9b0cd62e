package board_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clasp-dev/clasp/internal/board"
	"github.com/clasp-dev/clasp/internal/httpapi"
	"github.com/clasp-dev/clasp/internal/store/sqlite"
)

// newBoard serves the board in front of the real API on a real SQLite
// file, and returns its URL and board token.
func newBoard(t *testing.T, cfg board.Config) (string, string) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "clasp.db"), sqlite.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
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

// TestSignInCookie: a page without the cookie redirects to /login; a bad
// token gets the form back with 401 and no cookie; the board token sets an
// HttpOnly, SameSite=Strict cookie (not Secure over plain HTTP) that the
// pages and the API then accept; sign-out clears it.
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
	if c.Name != board.CookieName || c.Value != token || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure {
		t.Fatalf("cookie = %+v, want HttpOnly SameSite=Strict, not Secure over HTTP", c)
	}
	cookie := map[string]string{"Cookie": board.CookieName + "=" + token}
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
	hdr := map[string]string{"Cookie": board.CookieName + "=" + token, "Content-Type": "application/json", "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}
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
	cookie := map[string]string{"Cookie": board.CookieName + "=" + token, "Content-Type": "application/json", "Origin": u, "Sec-Fetch-Site": "same-origin"}
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
