package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clasp-dev/clasp/client"
	"github.com/clasp-dev/clasp/internal/mcp"
)

// headerTransport adds fixed headers to every request.
type headerTransport struct{ h map[string]string }

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func httpSession(t *testing.T, url string, headers map[string]string) *sdk.ClientSession {
	t.Helper()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "http-test", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: headerTransport{headers}}}, nil)
	if err != nil {
		t.Fatalf("connect %s/mcp: %v", url, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestHTTPEndpoint drives /mcp of `clasp serve`: the same tools, acting in
// the run of the bearer run token (or of X-Clasp-Run-Id with the API key),
// a conflict for a second run, and the SDK's Host and Origin checks.
func TestHTTPEndpoint(t *testing.T) {
	stores(t, func(t *testing.T, dbURL string) {
		w := newWorld(t, dbURL, 30*time.Second, 1)
		ctx := context.Background()
		agent := client.New(w.url, client.WithToken(w.keys[0]))
		r1, err := agent.RunOpen(ctx, client.RunOpenRequest{InvocationSource: "http-test"})
		if err != nil {
			t.Fatal(err)
		}
		r2, err := agent.RunOpen(ctx, client.RunOpenRequest{InvocationSource: "http-test"})
		if err != nil {
			t.Fatal(err)
		}
		a := httpSession(t, w.url, map[string]string{"Authorization": "Bearer " + r1.RunToken})
		b := httpSession(t, w.url, map[string]string{"Authorization": "Bearer " + w.keys[0], "X-Clasp-Run-Id": r2.ID})
		tools, err := a.ListTools(ctx, nil)
		if err != nil || len(tools.Tools) != 9 {
			t.Fatalf("tools/list: %v, %d tools", err, len(tools.Tools))
		}
		c := call(t, a, "claim_next_issue", nil)
		if c.IsError || c.str("outcome") != "claimed" || !strings.HasPrefix(c.str("stamp"), "Clasp-Issue: ACME-1@") {
			t.Fatalf("claim over HTTP: %+v", c.S)
		}
		ident := c.str("issue", "identifier")
		conf := call(t, b, "checkout_issue", map[string]any{"issue": ident})
		if !conf.IsError || conf.str("outcome") != "conflict" || conf.str("heldBy", "runId") != r1.ID || conf.str("heldBy", "agent") != "coder" {
			t.Fatalf("second run's checkout over HTTP: %+v", conf.S)
		}
		d := call(t, a, "update_issue_status", map[string]any{"issue": ident, "status": "done", "comment": "via http"})
		if d.IsError || d.str("issue", "status") != "done" {
			t.Fatalf("done over HTTP: %+v", d.S)
		}
		if run, _ := w.board.RunGet(ctx, r1.ID); run.Status.Terminal() {
			t.Errorf("the stateless endpoint ended the caller's run")
		}

		// No run named: the claim says how to name one.
		norun := httpSession(t, w.url, map[string]string{"Authorization": "Bearer " + w.keys[0]})
		if r := call(t, norun, "claim_next_issue", nil); !r.IsError || !strings.Contains(r.str("message"), "X-Clasp-Run-Id") {
			t.Errorf("claim without a run: %+v", r.S)
		}
		if r := call(t, norun, "session_status", nil); !r.IsError || r.str("error", "code") != "run_id_required" || !strings.Contains(r.str("message"), "X-Clasp-Run-Id") {
			t.Errorf("session_status without a run: %+v", r.S)
		}
		if r := call(t, a, "session_status", nil); r.IsError || r.str("outcome") != "ok" {
			t.Errorf("session_status with a run token: %+v", r.S)
		}
		// No credential: every tool names the Authorization header.
		anon := httpSession(t, w.url, nil)
		if r := call(t, anon, "list_my_issues", nil); !r.IsError || r.str("error", "setting") != "Authorization" {
			t.Errorf("no credential: %+v", r.S)
		}

		// DNS rebinding and cross-origin requests are refused by the SDK.
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
		for name, set := range map[string]func(*http.Request){
			"foreign Host": func(r *http.Request) { r.Host = "evil.example" },
			"foreign Origin": func(r *http.Request) {
				r.Header.Set("Origin", "http://evil.example")
				r.Header.Set("Sec-Fetch-Site", "cross-site")
			},
		} {
			req, _ := http.NewRequest(http.MethodPost, w.url+"/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer "+r1.RunToken)
			set(req)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s: status %d, want 403", name, resp.StatusCode)
			}
		}
	})
}

// TestHTTPTransportErrors: refusals of /mcp before the JSON-RPC layer answer
// the API's JSON error body with the status's code, and bodies are capped
// at the API's 1 MiB.
func TestHTTPTransportErrors(t *testing.T) {
	w := newWorld(t, "", 30*time.Second, 1)
	ok := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"` + strings.Repeat("x", 1<<20) + `"}}`
	for _, c := range []struct {
		name, method, body, ctype, origin string
		status                            int
		code                              string
	}{
		{"text body", http.MethodPost, ok, "text/plain", "", http.StatusUnsupportedMediaType, "unsupported_media_type"},
		{"body over 1 MiB", http.MethodPost, big, "application/json", "", http.StatusRequestEntityTooLarge, "body_too_large"},
		{"PUT", http.MethodPut, ok, "application/json", "", http.StatusMethodNotAllowed, "method_not_allowed"},
		{"foreign Origin", http.MethodPost, ok, "application/json", "http://evil.example", http.StatusForbidden, "forbidden"},
	} {
		req, _ := http.NewRequest(c.method, w.url+"/mcp", strings.NewReader(c.body))
		req.Header.Set("Content-Type", c.ctype)
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+w.keys[0])
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
			req.Header.Set("Sec-Fetch-Site", "cross-site")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error   string         `json:"error"`
			Code    string         `json:"code"`
			Details map[string]any `json:"details"`
		}
		derr := json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != c.status || derr != nil || body.Code != c.code || body.Error == "" || body.Details == nil ||
			resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: status %d %q, body %+v (%v); want %d with code %s", c.name, resp.StatusCode, resp.Header.Get("Content-Type"), body, derr, c.status, c.code)
		}
		// Like every answer of the API, the refusal names its request.
		if rid := resp.Header.Get("X-Request-Id"); rid == "" || body.Details["requestId"] != rid {
			t.Errorf("%s: X-Request-Id %q, details.requestId %v; want the same id in both", c.name, rid, body.Details["requestId"])
		}
	}
	// A request within the cap still works through the wrapper.
	req, _ := http.NewRequest(http.MethodPost, w.url+"/mcp", strings.NewReader(ok))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+w.keys[0])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("tools/list within the cap: status %d", resp.StatusCode)
	}
	if rid := resp.Header.Get("X-Request-Id"); rid == "" {
		t.Errorf("tools/list: no X-Request-Id in the answer")
	}

	// A caller's valid X-Request-Id is kept, in the answer and in the activity
	// rows the tool call wrote; an invalid one is replaced.
	agent := client.New(w.url, client.WithToken(w.keys[0]))
	run, err := agent.RunOpen(context.Background(), client.RunOpenRequest{InvocationSource: "http-test"})
	if err != nil {
		t.Fatal(err)
	}
	claim := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"claim_next_issue","arguments":{}}}`
	for _, c := range []struct{ sent, want string }{{"trace-mcp-1", "trace-mcp-1"}, {"not valid!", ""}} {
		req, _ = http.NewRequest(http.MethodPost, w.url+"/mcp", strings.NewReader(claim))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+run.RunToken)
		req.Header.Set("X-Request-Id", c.sent)
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got := resp.Header.Get("X-Request-Id")
		if resp.StatusCode != http.StatusOK || got == "" || (c.want != "" && got != c.want) || (c.want == "" && got == c.sent) {
			t.Errorf("X-Request-Id %q sent: status %d, answer's id %q", c.sent, resp.StatusCode, got)
		}
	}
	acts, err := w.board.CompanyActivity(context.Background(), w.co.ID, client.ActivityListParams{Action: "issue.checked_out"})
	if err != nil {
		t.Fatal(err)
	}
	if len(acts.Items) != 1 || acts.Items[0].RequestID == nil || *acts.Items[0].RequestID != "trace-mcp-1" {
		t.Errorf("checkout rows after the claim over /mcp: %d, the newest %+v; want one, with requestId trace-mcp-1", len(acts.Items), acts.Items)
	}
}

// TestHTTPHostCheckAndProxies: a loopback request naming a public Host is
// refused (DNS rebinding) unless it comes from a trusted proxy, which
// forwards the public Host; a credential header given twice answers 400.
func TestHTTPHostCheckAndProxies(t *testing.T) {
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	post := func(url, host string, hdr map[string][]string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(list))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, vs := range hdr {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Code string `json:"code"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Code
	}
	plain := httptest.NewServer(mcp.NewHTTPHandler(http.NotFoundHandler(), nil, nil))
	defer plain.Close()
	proxied := httptest.NewServer(mcp.NewHTTPHandler(http.NotFoundHandler(), nil, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}))
	defer proxied.Close()

	if st, code := post(plain.URL, "clasp.example.com", nil); st != http.StatusForbidden || code != "forbidden" {
		t.Errorf("public Host over loopback, no trusted proxy: %d %s; want 403 forbidden", st, code)
	}
	if st, _ := post(plain.URL, "", nil); st != http.StatusOK {
		t.Errorf("loopback Host: %d; want 200", st)
	}
	if st, _ := post(proxied.URL, "clasp.example.com", nil); st != http.StatusOK {
		t.Errorf("public Host from a trusted proxy: %d; want 200", st)
	}
	for _, h := range []string{"Authorization", "X-Clasp-Run-Id", "X-Paperclip-Run-Id"} {
		if st, code := post(plain.URL, "", map[string][]string{h: {"Bearer a", "Bearer b"}}); st != http.StatusBadRequest || code != "invalid_request" {
			t.Errorf("%s twice: %d %s; want 400 invalid_request", h, st, code)
		}
	}
}

// TestHTTPWording: over /mcp, session_status reports the server's URL as
// the caller reached it, and a refused bearer is told about the MCP
// client's header, not about CLASP_API_KEY and restarting a server.
func TestHTTPWording(t *testing.T) {
	w := newWorld(t, "", 30*time.Second, 0)
	ctx := context.Background()
	run, err := client.New(w.url, client.WithToken(w.keys[0])).RunOpen(ctx, client.RunOpenRequest{InvocationSource: "http-test"})
	if err != nil {
		t.Fatal(err)
	}
	a := httpSession(t, w.url, map[string]string{"Authorization": "Bearer " + run.RunToken})
	if r := call(t, a, "session_status", nil); r.IsError || r.str("server") != w.url {
		t.Errorf("session_status over HTTP: server %q, want %q; %+v", r.str("server"), w.url, r.S)
	}
	bad := httpSession(t, w.url, map[string]string{"Authorization": "Bearer clasp_ak_notakey", "X-Clasp-Run-Id": run.ID})
	r := call(t, bad, "session_status", nil)
	if msg := r.str("message"); !r.IsError || strings.Contains(msg, "CLASP_API_KEY") || strings.Contains(msg, "restart") || !strings.Contains(msg, "Authorization") {
		t.Errorf("refused bearer over HTTP: %q; want it to name the Authorization header, not CLASP_API_KEY or a restart", msg)
	}
}
