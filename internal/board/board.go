// Package board is the web board of the clasp server: server-rendered
// html/template pages (Board, Issue, Runs, Run, Agents, Locks, Activity) served
// at / next to the HTTP API, with their assets embedded in the binary and
// one hand-written ES module (assets/board.js) for the live layer.
//
// The board reads and acts only through the public API: pages are built
// from in-process GET requests to the API handler, and the page's actions
// are fetch() calls from the browser to /api/... . Signing in with an
// operator token opens a board session (POST /api/sessions); a signed-in
// browser carries only that session's secret, never the token, in an
// HttpOnly, SameSite=Strict cookie (Secure when the request came over TLS,
// directly or through a trusted proxy saying X-Forwarded-Proto: https),
// and signing out ends the session on the server. Handler turns the
// cookie into the bearer of /api requests that have no Authorization
// header, after refusing cross-origin writes
// (net/http's CrossOriginProtection: Sec-Fetch-Site, else Origin against
// Host). So every action is the API's own handler, validation and audit
// row, and CSRF needs both the SameSite cookie and a same-origin request.
//
// Every response of the board carries a strict Content-Security-Policy
// (no inline script or style), and agent-written text reaches the page
// only through html/template's escaping or the DOM's textContent.
package board

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/clasp-dev/clasp/internal/httpapi"
	"github.com/clasp-dev/clasp/internal/secret"
)

//go:embed assets templates
var files embed.FS

// CookieName is the cookie that holds the board session secret of a
// signed-in browser (a clasp_bs_ credential, never an operator token).
const CookieName = "clasp_board"

// CSP is the Content-Security-Policy of every board response.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Config configures a Board.
type Config struct {
	// API is the HTTP API's root handler (httpapi.Server.Handler): the
	// board forwards /api, /healthz, /readyz and /metrics to it and reads
	// its pages' data from it. Required.
	API http.Handler
	// LocalTrusted mirrors serve --local-trusted: tokenless loopback
	// requests are the board, so there is no sign-in.
	LocalTrusted bool
	// ReadOnly (serve --board-read-only) hides every action in the pages
	// and refuses, with 403, every write the board's browser sends.
	ReadOnly bool
	// Logger receives template and internal errors. Default: slog.Default().
	Logger *slog.Logger
	// Now is the clock the pages are rendered with. Default time.Now.
	Now func() time.Time
	// TrustedProxies are the reverse proxies (serve --trusted-proxy) whose
	// X-Forwarded-Proto is believed: a sign-in through one of them saying
	// https sets a Secure cookie.
	TrustedProxies []netip.Prefix
}

// Board serves the web board. Build it with New; safe for concurrent use.
type Board struct {
	cfg    Config
	pages  map[string]*template.Template
	static http.Handler
	cop    *http.CrossOriginProtection
	mux    *http.ServeMux
}

// New parses the embedded templates and returns a Board. It returns an
// error only when cfg.API is nil or a template does not parse (a bug).
func New(cfg Config) (*Board, error) {
	if cfg.API == nil {
		return nil, errors.New("board.New: Config.API is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	b := &Board{cfg: cfg, pages: map[string]*template.Template{}, cop: http.NewCrossOriginProtection(), mux: http.NewServeMux()}
	for _, name := range []string{"login", "board", "issue", "runs", "run", "agents", "locks", "activity", "attention", "webhooks", "nocompany", "error"} {
		t, err := template.New(name).Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("board template %s: %w", name, err)
		}
		b.pages[name] = t
	}
	assets, err := fs.Sub(files, "assets")
	if err != nil {
		return nil, err
	}
	b.static = http.StripPrefix("/static/", http.FileServerFS(assets))
	b.routes()
	return b, nil
}

func (b *Board) routes() {
	b.mux.HandleFunc("GET /static/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		b.static.ServeHTTP(w, r)
	})
	b.mux.HandleFunc("GET /login", b.loginForm)
	b.mux.HandleFunc("POST /login", b.login)
	b.mux.HandleFunc("POST /logout", b.logout)
	b.mux.HandleFunc("GET /{$}", b.page("board", b.boardData))
	b.mux.HandleFunc("GET /issues/{ref}", b.page("issue", b.issueData))
	b.mux.HandleFunc("GET /runs", b.page("runs", b.runsData))
	b.mux.HandleFunc("GET /runs/{id}", b.page("run", b.runData))
	b.mux.HandleFunc("GET /agents", b.page("agents", b.agentsData))
	b.mux.HandleFunc("GET /locks", b.page("locks", b.locksData))
	b.mux.HandleFunc("GET /attention", b.page("attention", b.attentionData))
	b.mux.HandleFunc("GET /webhooks", b.page("webhooks", b.webhooksData))
	b.mux.HandleFunc("GET /activity", b.page("activity", b.activityData))
	b.mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
}

// Handler returns the server's root handler: the API's paths go to the
// API (a board cookie standing in for the bearer token, see the package
// doc), every other path is the board's (404 page for unknown ones).
func (b *Board) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if strings.HasPrefix(p, "/api/") || p == "/api" || p == "/healthz" || p == "/readyz" || p == "/metrics" {
			b.serveAPI(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		b.mux.ServeHTTP(w, r)
	})
}

// sessionCookie returns the board session secret r's cookie carries, ""
// for none. A cookie holding anything but a session secret (such as the
// operator token itself, as boards before sessions stored) is ignored:
// that browser signs in again.
func sessionCookie(r *http.Request) string {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return ""
	}
	if kind, form := secret.Check(c.Value); kind != secret.Session || form != secret.Current {
		return ""
	}
	return c.Value
}

// unsafeMethod reports whether m changes state (anything but GET, HEAD, OPTIONS).
func unsafeMethod(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

// serveAPI forwards r to the API. Without an Authorization header, the
// board cookie becomes "Authorization: Bearer <token>"; a write carrying
// the cookie must be same-origin (403 otherwise). In read-only mode a
// write from the board's browser (the cookie, or a browser's
// Sec-Fetch-Site header in local-trusted mode) is refused with 403.
func (b *Board) serveAPI(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") == "" {
		fromBrowser := false
		if v := sessionCookie(r); v != "" {
			fromBrowser = true
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+v)
		} else if b.cfg.LocalTrusted && r.Header.Get("Sec-Fetch-Site") != "" {
			fromBrowser = true
		}
		if fromBrowser && unsafeMethod(r.Method) {
			if err := b.cop.Check(r); err != nil {
				writeAPIError(w, r, http.StatusForbidden, "forbidden", "Cross-origin requests that change state are refused.")
				return
			}
			if b.cfg.ReadOnly {
				writeAPIError(w, r, http.StatusForbidden, "forbidden", "The board is read-only on this server (serve --board-read-only): it makes no changes.")
				return
			}
		}
	}
	b.cfg.API.ServeHTTP(w, r)
}

// writeAPIError writes, for a request r the board refuses before the API
// sees it, the API's JSON error (RULES.md, Errors and requests) with
// status, code and msg: details.requestId and the X-Request-Id header are
// r's id as the API takes it (a valid X-Request-Id, else a new one).
func writeAPIError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	rid := httpapi.RequestIDOf(r)
	w.Header().Set(httpapi.RequestIDHeader, rid)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Error   string            `json:"error"`
		Code    string            `json:"code"`
		Details map[string]string `json:"details"`
	}{msg, code, map[string]string{"requestId": rid}})
}

// apiError is a non-2xx answer of the API: its status and JSON error body.
type apiError struct {
	Status  int            `json:"-"`
	Message string         `json:"error"`
	Code    string         `json:"code"`
	Details map[string]any `json:"details"`
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// recorder is an in-memory http.ResponseWriter for in-process API calls.
type recorder struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) WriteHeader(s int) {
	if r.status == 0 {
		r.status = s
	}
}
func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(p)
}

// client performs the API calls of one page request, as that request's
// caller: the board cookie's token as bearer (none in local-trusted mode),
// with the request's Host and remote address.
type client struct {
	b     *Board
	r     *http.Request
	token string
}

// get calls GET path on the API and decodes its JSON into out. It returns
// the Link rel="next" URL ("" for none) and an *apiError for a non-2xx
// answer.
func (c *client) get(path string, out any) (next string, err error) {
	return c.call(http.MethodGet, path, out)
}

// call is get with any method (a body-less request).
func (c *client) call(method, path string, out any) (next string, err error) {
	req, err := http.NewRequestWithContext(c.r.Context(), method, path, nil)
	if err != nil {
		return "", err
	}
	req.Host = c.r.Host
	req.RemoteAddr = c.r.RemoteAddr
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	rec := &recorder{h: http.Header{}}
	c.b.cfg.API.ServeHTTP(rec, req)
	if rec.status < 200 || rec.status > 299 {
		e := &apiError{Status: rec.status}
		if json.Unmarshal(rec.body.Bytes(), e) != nil || e.Message == "" {
			e.Message = strings.TrimSpace(rec.body.String())
		}
		return "", e
	}
	if out != nil {
		if err := json.Unmarshal(rec.body.Bytes(), out); err != nil {
			return "", fmt.Errorf("decode %s: %w", path, err)
		}
	}
	return nextLink(rec.h.Get("Link")), nil
}

// nextLink returns the URL of a Link header's rel="next" ("" if none).
func nextLink(h string) string {
	for _, part := range strings.Split(h, ",") {
		u, params, ok := strings.Cut(strings.TrimSpace(part), ";")
		if ok && strings.Contains(params, `rel="next"`) {
			return strings.Trim(strings.TrimSpace(u), "<>")
		}
	}
	return ""
}

// cursorOf returns the cursor query parameter of a next link ("" if none).
func cursorOf(next string) string {
	if next == "" {
		return ""
	}
	u, err := url.Parse(next)
	if err != nil {
		return ""
	}
	return u.Query().Get("cursor")
}

// loginForm: GET /login, the sign-in form (a redirect to / when signing in
// is not needed).
func (b *Board) loginForm(w http.ResponseWriter, r *http.Request) {
	if b.cfg.LocalTrusted {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	b.render(w, r, "login", http.StatusOK, &view{Title: "Sign in", Data: loginView{}})
}

type loginView struct{ Error string }

// login: POST /login with the form field token, an operator token. It
// opens a board session with it (POST /api/sessions); on success the
// session's secret, not the token, is stored in the cookie (HttpOnly,
// SameSite=Strict, Secure as secureRequest says, expiring with the
// session) and the browser is sent to /; otherwise the form comes back
// with a message (401).
func (b *Board) login(w http.ResponseWriter, r *http.Request) {
	if err := b.cop.Check(r); err != nil {
		http.Error(w, "Cross-origin sign-in is refused.", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	token := strings.TrimSpace(r.PostFormValue("token"))
	msg := ""
	var sess struct {
		Session   string    `json:"session"`
		ExpiresAt time.Time `json:"expiresAt"`
	}
	if token == "" {
		msg = "Enter an operator token (the board token is printed by clasp serve at first start, and kept in <data-dir>/board-token)."
	} else {
		c := &client{b: b, r: r, token: token}
		if _, err := c.call(http.MethodPost, "/api/sessions", &sess); err != nil {
			var ae *apiError
			if errors.As(err, &ae) && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden) {
				msg = "That token is not the board token or an operator token of this server, or it is revoked or expired."
			} else {
				msg = "The server could not check the token: " + err.Error()
			}
		}
	}
	if msg != "" {
		b.render(w, r, "login", http.StatusUnauthorized, &view{Title: "Sign in", Data: loginView{Error: msg}})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: sess.Session, Path: "/", Expires: sess.ExpiresAt, HttpOnly: true, Secure: b.secureRequest(r), SameSite: http.SameSiteStrictMode}) // #nosec G124 -- Secure whenever the request came over TLS, directly or through a trusted proxy; plain HTTP is served only on loopback or with --insecure-http, where a Secure cookie would never come back
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// secureRequest reports whether r came over TLS: directly, or through one
// of Config.TrustedProxies saying X-Forwarded-Proto: https.
func (b *Board) secureRequest(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if !strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https") {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	for _, p := range b.cfg.TrustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// logout: POST /logout ends the board session on the server (DELETE
// /api/sessions/current), so its secret works nowhere any more, clears
// the cookie and shows the sign-in form.
func (b *Board) logout(w http.ResponseWriter, r *http.Request) {
	if err := b.cop.Check(r); err != nil {
		http.Error(w, "Cross-origin sign-out is refused.", http.StatusForbidden)
		return
	}
	if v := sessionCookie(r); v != "" {
		c := &client{b: b, r: r, token: v}
		if _, err := c.call(http.MethodDelete, "/api/sessions/current", nil); err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized { // 401: it had ended already
				b.cfg.Logger.Warn("board sign-out: the session could not be ended", "err", err)
			}
		}
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: b.secureRequest(r), SameSite: http.SameSiteStrictMode}) // #nosec G124 -- deletes the cookie; Secure as when it was set
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// render executes page name with v: the whole page, or only its "live"
// template when the request asks for a fragment (X-Board-Fragment: 1,
// which the live layer sends).
func (b *Board) render(w http.ResponseWriter, r *http.Request, name string, status int, v *view) {
	v.ReadOnly = v.ReadOnly || b.cfg.ReadOnly
	v.LocalTrusted = b.cfg.LocalTrusted
	v.Page = name
	v.ServerNow = b.cfg.Now().UnixMilli()
	tmpl := "layout"
	if r.Header.Get("X-Board-Fragment") == "1" {
		tmpl = "live"
	}
	var buf bytes.Buffer
	if err := b.pages[name].ExecuteTemplate(&buf, tmpl, v); err != nil {
		b.cfg.Logger.Error("board template", "page", name, "err", err)
		http.Error(w, "The page could not be rendered.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = io.Copy(w, &buf)
}
