package webhook_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/sqlite"
	"github.com/clasp-dev/clasp/internal/webhook"
)

// snippet returns the first fenced block of language lang in
// docs/webhooks.md whose text matches must.
func snippet(t *testing.T, lang string, must *regexp.Regexp) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```")
	for _, m := range re.FindAllSubmatch(b, -1) {
		if must.Match(m[1]) {
			return string(m[1])
		}
	}
	t.Fatalf("docs/webhooks.md has no %s block matching %s", lang, must)
	return ""
}

// TestDocSnippets: the signature verification snippets of
// docs/webhooks.md (Go, Python, Node), run as the documented programs on
// a real delivery that a dispatcher sent to a loopback receiver, accept
// it, and refuse it with one byte of the body changed or another secret
// (RULES.md W2).
func TestDocSnippets(t *testing.T) {
	ctx := t.Context()
	stDrv, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "clasp.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(stDrv)
	defer st.Close()
	type got struct {
		sig  string
		body []byte
	}
	arrived := make(chan got, 1)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(r.Body)
		select {
		case arrived <- got{sig: r.Header.Get(clasp.HeaderSignature), body: buf.Bytes()}:
		default:
		}
	}))
	defer rc.Close()
	co, err := st.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "docs", IssuePrefix: "DOC"})
	if err != nil {
		t.Fatal(err)
	}
	const secret = "whsec_documented-secret-of-the-test"
	if _, err := st.WebhookCreate(ctx, &store.WebhookCreateParams{CompanyID: co.ID, URL: rc.URL, Events: []string{"issue.created"}, Secret: secret}); err != nil {
		t.Fatal(err)
	}
	d := webhook.New(st, webhook.Config{AllowPrivate: true})
	d.Start(ctx)
	defer d.Stop()
	if _, err := st.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: "signed", Actor: store.Actor{Type: clasp.ActorBoard}}); err != nil {
		t.Fatal(err)
	}
	g := <-arrived
	tampered := bytes.Replace(g.body, []byte(`"signed"`), []byte(`"Signed"`), 1)

	dir := t.TempDir()
	goFile := filepath.Join(dir, "verify.go")
	pyFile := filepath.Join(dir, "verify.py")
	jsFile := filepath.Join(dir, "verify.js")
	write := func(path, text string) {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(goFile, snippet(t, "go", regexp.MustCompile(`package main`)))
	write(pyFile, snippet(t, "python", regexp.MustCompile(`def verify`)))
	write(jsFile, snippet(t, "js", regexp.MustCompile(`function verify`)))
	goBin := filepath.Join(dir, "verify")
	if out, err := exec.Command("go", "build", "-o", goBin, goFile).CombinedOutput(); err != nil {
		t.Fatalf("build the Go snippet: %v\n%s", err, out)
	}
	langs := []struct {
		name string
		argv []string
	}{
		{"go", []string{goBin}},
		{"python", []string{"python3", pyFile}},
		{"node", []string{"node", jsFile}},
	}
	for _, l := range langs {
		t.Run(l.name, func(t *testing.T) {
			if _, err := exec.LookPath(l.argv[0]); err != nil && l.name == "node" {
				t.Skip("node is not installed")
			}
			run := func(sec string, body []byte) error {
				cmd := exec.Command(l.argv[0], l.argv[1:]...)
				cmd.Env = append(os.Environ(), "WEBHOOK_SECRET="+sec, "CLASP_SIGNATURE="+g.sig)
				cmd.Stdin = bytes.NewReader(body)
				out, err := cmd.CombinedOutput()
				if err != nil && len(out) > 0 {
					t.Logf("%s: %s", l.name, out)
				}
				return err
			}
			if err := run(secret, g.body); err != nil {
				t.Errorf("the %s snippet refuses a real delivery: %v", l.name, err)
			}
			if err := run(secret, tampered); err == nil {
				t.Errorf("the %s snippet accepts a changed body", l.name)
			}
			if err := run("whsec_another-secret-entirely", g.body); err == nil {
				t.Errorf("the %s snippet accepts another secret's signature", l.name)
			}
		})
	}
}
