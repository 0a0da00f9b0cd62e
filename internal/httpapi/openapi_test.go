package httpapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/clasp-dev/clasp"
)

var updateAPIReference = flag.Bool("update", false, "rewrite docs/api.md from openapi.json")

// openAPI is the parsed document and the schemas compiled from it.
type openAPI struct {
	doc struct {
		Paths map[string]map[string]*oaOperation `json:"paths"`
	}
	raw      map[string]any
	mu       sync.Mutex
	compiled map[string]*jsonschema.Schema // by JSON pointer of the schema
	compiler *jsonschema.Compiler
	n        int
}

type oaOperation struct {
	Summary     string                 `json:"summary"`
	Description string                 `json:"description"`
	Tags        []string               `json:"tags"`
	Parameters  []oaParameter          `json:"parameters"`
	RequestBody *oaBody                `json:"requestBody"`
	Responses   map[string]*oaResponse `json:"responses"`
}

type oaParameter struct {
	Name        string         `json:"name"`
	In          string         `json:"in"`
	Required    bool           `json:"required"`
	Description string         `json:"description"`
	Schema      map[string]any `json:"schema"`
}

type oaBody struct {
	Content map[string]struct {
		Schema map[string]any `json:"schema"`
	} `json:"content"`
}

type oaResponse struct {
	Description string                     `json:"description"`
	Headers     map[string]json.RawMessage `json:"headers"`
	Content     map[string]struct {
		Schema map[string]any `json:"schema"`
	} `json:"content"`
}

var (
	oaOnce sync.Once
	oaDoc  *openAPI
	oaErr  error
	// oaChecked counts the responses checked against the document.
	oaChecked atomic.Int64
)

// loadOpenAPI parses the embedded document once.
func loadOpenAPI(t testing.TB) *openAPI {
	t.Helper()
	oaOnce.Do(func() {
		o := &openAPI{compiled: map[string]*jsonschema.Schema{}}
		if oaErr = json.Unmarshal(openAPIDocument, &o.doc); oaErr != nil {
			return
		}
		var raw any
		if raw, oaErr = jsonschema.UnmarshalJSON(bytes.NewReader(openAPIDocument)); oaErr != nil {
			return
		}
		o.raw = raw.(map[string]any)
		o.compiler = jsonschema.NewCompiler()
		o.compiler.DefaultDraft(jsonschema.Draft2020)
		o.compiler.AssertFormat()
		if oaErr = o.compiler.AddResource("https://clasp.invalid/openapi.json", raw); oaErr != nil {
			return
		}
		oaDoc = o
	})
	if oaErr != nil {
		t.Fatalf("internal/httpapi/openapi.json: %v", oaErr)
	}
	return oaDoc
}

// schema compiles s, a schema object of the document (its $refs point
// into #/components/schemas), once per pointer key.
func (o *openAPI) schema(key string, s map[string]any) (*jsonschema.Schema, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if c, ok := o.compiled[key]; ok {
		return c, nil
	}
	data, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	data = bytes.ReplaceAll(data, []byte(`"#/components/`), []byte(`"https://clasp.invalid/openapi.json#/components/`))
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	o.n++
	url := fmt.Sprintf("https://clasp.invalid/schema-%d.json", o.n)
	if err := o.compiler.AddResource(url, v); err != nil {
		return nil, err
	}
	c, err := o.compiler.Compile(url)
	if err != nil {
		return nil, err
	}
	o.compiled[key] = c
	return c, nil
}

// genericStatuses are the error statuses any /api route may answer
// (body reading, limits, failures); a response with one of them that its
// operation does not list is checked against the Error schema.
var genericStatuses = map[int]bool{400: true, 401: true, 403: true, 405: true, 408: true, 413: true, 415: true, 429: true, 431: true, 500: true, 503: true}

// checkOpenAPIResponse checks a real answer of srv to req against the
// document: the status must be listed for the route (or be a generic
// error), and a JSON body must match the listed schema. Routes the
// document lacks are left to TestOpenAPIRoutes.
func checkOpenAPIResponse(t testing.TB, srv *Server, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	o := loadOpenAPI(t)
	_, pattern := srv.mux.Handler(req)
	where := fmt.Sprintf("%s %s answered %d", req.Method, req.URL.Path, status)
	var rs *oaResponse
	key := ""
	if pattern != "" {
		method, path, _ := strings.Cut(pattern, " ")
		op := o.doc.Paths[path][strings.ToLower(method)]
		if op == nil {
			return
		}
		rs = op.Responses[fmt.Sprint(status)]
		key = fmt.Sprintf("%s %d", pattern, status)
		if rs == nil && !genericStatuses[status] && status != http.StatusNotFound {
			t.Errorf("%s, a status internal/httpapi/openapi.json does not list for %s: add responses[\"%d\"] to that operation", where, pattern, status)
			return
		}
	}
	var sch map[string]any
	ctype, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
	if rs == nil { // an error the route does not list, or no route: the Error body
		key = "error"
		sch = map[string]any{"$ref": "#/components/schemas/Error"}
		ctype = "application/json"
	} else if len(rs.Content) == 0 {
		if len(bytes.TrimSpace(body)) != 0 {
			t.Errorf("%s with a body, but openapi.json lists none for it", where)
		}
		return
	} else {
		c, ok := rs.Content[ctype]
		if !ok {
			t.Errorf("%s with Content-Type %q, which openapi.json does not list for %s", where, ctype, key)
			return
		}
		sch = c.Schema
	}
	oaChecked.Add(1)
	if ctype != "application/json" {
		return
	}
	compiled, err := o.schema(key, sch)
	if err != nil {
		t.Errorf("compile the openapi.json schema of %s: %v", key, err)
		return
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Errorf("%s with a body that is not JSON: %v: %.200s", where, err, body)
		return
	}
	if err := compiled.Validate(v); err != nil {
		t.Errorf("%s with a body that does not match its schema in internal/httpapi/openapi.json (%s): %v\nbody: %.500s", where, key, err, body)
	}
}

// fixedRoutes are the routes registered on the mux directly, not with
// Server.handle.
var fixedRoutes = []string{"GET /healthz", "GET /readyz", "GET /metrics", "GET /api/openapi.json"}

var pathParam = regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`)

// TestOpenAPIRoutes: every route the server registers has an entry in
// internal/httpapi/openapi.json, every entry has a route that serves it
// (probing the mux with the entry's path), and every entry declares its
// path parameters and at least its success and error answers, with
// schemas that compile.
func TestOpenAPIRoutes(t *testing.T) {
	t.Parallel()
	o := loadOpenAPI(t)
	b := setup(t)
	served := map[string]bool{}
	for _, p := range append(append([]string(nil), b.srv.patterns...), fixedRoutes...) {
		served[p] = true
		method, path, _ := strings.Cut(p, " ")
		if o.doc.Paths[path][strings.ToLower(method)] == nil {
			t.Errorf("route %s is served but internal/httpapi/openapi.json has no entry for it: add %q under paths[%q], with its parameters, request body, responses and error codes (see the entries beside it), then regenerate docs/api.md with: go test ./internal/httpapi -run TestAPIReference -update",
				p, strings.ToLower(method), path)
		}
	}
	var documented []string
	for path, ops := range o.doc.Paths {
		for method, op := range ops {
			p := strings.ToUpper(method) + " " + path
			documented = append(documented, p)
			probe := pathParam.ReplaceAllString(path, "0191e0a4-0000-7000-8000-000000000001")
			req := httptest.NewRequest(strings.ToUpper(method), probe, nil)
			if _, pat := b.srv.mux.Handler(req); pat != p {
				t.Errorf("internal/httpapi/openapi.json documents %s, but no route serves it (%s %s goes to %q): remove the entry, or register the route", p, req.Method, probe, pat)
			}
			if strings.HasPrefix(path, "/api/") && !served[p] && p != "GET /api/openapi.json" {
				t.Errorf("internal/httpapi/openapi.json documents %s, which is not registered with Server.handle", p)
			}
			declared := map[string]bool{}
			for _, prm := range op.Parameters {
				if prm.In == "path" {
					declared[prm.Name] = true
				}
			}
			for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
				if !declared[m[1]] {
					t.Errorf("%s: path parameter %s is not declared in its parameters", p, m[1])
				}
			}
			if op.Summary == "" || len(op.Responses) == 0 {
				t.Errorf("%s: an entry needs a summary and its responses", p)
			}
			if strings.HasPrefix(path, "/api/") && p != "GET /api/openapi.json" {
				for _, st := range []string{"401", "500"} {
					if op.Responses[st] == nil {
						t.Errorf("%s: responses lack %s", p, st)
					}
				}
			}
			for st, rs := range op.Responses {
				for ct, c := range rs.Content {
					if _, err := o.schema(p+" "+st+" "+ct, c.Schema); err != nil {
						t.Errorf("%s %s %s: the schema does not compile: %v", p, st, ct, err)
					}
				}
			}
		}
	}
	if len(documented) < len(served) {
		t.Errorf("%d routes documented, %d served", len(documented), len(served))
	}
}

// TestOpenAPIResponseCheckCanFail: the check every test's answers go
// through refuses a body that breaks the schema and a status the route
// does not list, and the scenario tests' answers were checked.
func TestOpenAPIResponseCheckCanFail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := httptest.NewRequest("GET", "/api/companies/0191e0a4-0000-7000-8000-000000000001", nil)
	for _, tc := range []struct {
		status int
		body   string
	}{
		{200, `{"id":"not-a-uuid","name":"x","issuePrefix":"AB","branchTemplate":"clasp/{identifier}","createdAt":"2026-01-01T00:00:00Z","archivedAt":null,"escalateAfterFailures":3}`},
		{200, `{"id":"0191e0a4-0000-7000-8000-000000000001","name":"x","createdAt":"2026-01-01T00:00:00Z"}`},
		{409, `{"error":"x","code":"checkout_conflict","details":{}}`},
		{404, `{"error":"x","code":"no_such_code","details":{}}`},
	} {
		ft := &fakeT{TB: t}
		checkOpenAPIResponse(ft, b.srv, req, tc.status, http.Header{"Content-Type": {"application/json"}}, []byte(tc.body))
		if !ft.failed {
			t.Errorf("%d %s passed the check, want a failure", tc.status, tc.body)
		}
	}
	ft := &fakeT{TB: t}
	checkOpenAPIResponse(ft, b.srv, req, 200, http.Header{"Content-Type": {"application/json"}},
		[]byte(`{"id":"0191e0a4-0000-7000-8000-000000000001","name":"x","issuePrefix":"AB","branchTemplate":"clasp/{identifier}","createdAt":"2026-01-01T00:00:00Z","archivedAt":null,"escalateAfterFailures":3}`))
	if ft.failed {
		t.Errorf("a good company failed the check: %s", ft.msg)
	}
	// A scenario's answers go through the check.
	before := oaChecked.Load()
	t.Run("scenario", func(t *testing.T) { t.Run("S01", TestS01_CheckoutUnassignedTodo) })
	if oaChecked.Load() <= before {
		t.Errorf("the scenario's answers were not checked against the document")
	}
}

// fakeT records a failure instead of failing the test.
type fakeT struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fakeT) Errorf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
}
func (f *fakeT) Helper() {}

// TestAPIReference: docs/api.md is the document rendered for people; run
// with -update to rewrite it after changing openapi.json.
func TestAPIReference(t *testing.T) {
	t.Parallel()
	o := loadOpenAPI(t)
	got := renderAPIReference(o)
	path := filepath.Join("..", "..", "docs", "api.md")
	if *updateAPIReference {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate it: go test ./internal/httpapi -run TestAPIReference -update)", err)
	}
	if string(want) != got {
		t.Errorf("docs/api.md is not what internal/httpapi/openapi.json renders to: regenerate it with: go test ./internal/httpapi -run TestAPIReference -update")
	}
}

// renderAPIReference renders the document as Markdown: one section per
// route, in the order of the tags, with its parameters, body and answers.
func renderAPIReference(o *openAPI) string {
	var w strings.Builder
	info := o.raw["info"].(map[string]any)
	fmt.Fprintf(&w, "# clasp HTTP API reference\n\n<!-- Generated from internal/httpapi/openapi.json by `go test ./internal/httpapi -run TestAPIReference -update`; edit the JSON, not this file. -->\n\n")
	fmt.Fprintf(&w, "%s\n\nThe machine-readable document (OpenAPI 3.1) is served at `GET /api/openapi.json`.\n\n", info["description"])
	fmt.Fprintf(&w, "Authentication: `Authorization: Bearer <token>`, the board token (`clasp_bt_...`), an agent API key (`clasp_ak_...`) or a run token (`clasp_rt_...`).\n\n")
	type entry struct {
		method, path string
		op           *oaOperation
	}
	byTag := map[string][]entry{}
	for path, ops := range o.doc.Paths {
		for method, op := range ops {
			tag := "other"
			if len(op.Tags) > 0 {
				tag = op.Tags[0]
			}
			byTag[tag] = append(byTag[tag], entry{strings.ToUpper(method), path, op})
		}
	}
	var tags []string
	for _, t := range o.raw["tags"].([]any) {
		tags = append(tags, t.(map[string]any)["name"].(string))
	}
	fmt.Fprintf(&w, "## Routes\n\n| method | path | summary |\n|---|---|---|\n")
	for _, tag := range tags {
		es := byTag[tag]
		sort.Slice(es, func(i, j int) bool {
			if es[i].path != es[j].path {
				return es[i].path < es[j].path
			}
			return es[i].method < es[j].method
		})
		byTag[tag] = es
		for _, e := range es {
			fmt.Fprintf(&w, "| %s | `%s` | [%s](#%s) |\n", e.method, e.path, e.op.Summary, anchor(e.method+" "+e.path))
		}
	}
	for _, tag := range tags {
		fmt.Fprintf(&w, "\n## %s\n", strings.ToUpper(tag[:1])+tag[1:])
		for _, e := range byTag[tag] {
			fmt.Fprintf(&w, "\n### %s %s\n\n%s. %s\n", e.method, e.path, e.op.Summary, e.op.Description)
			if len(e.op.Parameters) > 0 {
				fmt.Fprintf(&w, "\n| parameter | in | type | description |\n|---|---|---|---|\n")
				for _, p := range e.op.Parameters {
					req := ""
					if p.Required {
						req = " (required)"
					}
					fmt.Fprintf(&w, "| `%s`%s | %s | %s | %s |\n", p.Name, req, p.In, schemaType(p.Schema), p.Description)
				}
			}
			if e.op.RequestBody != nil {
				for ct, c := range e.op.RequestBody.Content {
					fmt.Fprintf(&w, "\nBody (%s): %s\n", ct, schemaType(c.Schema))
				}
			}
			fmt.Fprintf(&w, "\n| status | answer |\n|---|---|\n")
			var sts []string
			for st := range e.op.Responses {
				sts = append(sts, st)
			}
			sort.Strings(sts)
			for _, st := range sts {
				rs := e.op.Responses[st]
				body := ""
				for ct, c := range rs.Content {
					body = fmt.Sprintf(" `%s` %s.", ct, schemaType(c.Schema))
				}
				fmt.Fprintf(&w, "| %s | %s%s |\n", st, rs.Description, body)
			}
		}
	}
	fmt.Fprintf(&w, "\n## Schemas\n")
	schemas := o.raw["components"].(map[string]any)["schemas"].(map[string]any)
	var names []string
	for n := range schemas {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := schemas[n].(map[string]any)
		fmt.Fprintf(&w, "\n### %s\n\n", n)
		if d, ok := s["description"].(string); ok {
			fmt.Fprintf(&w, "%s\n\n", d)
		}
		props, _ := s["properties"].(map[string]any)
		if len(props) == 0 {
			fmt.Fprintf(&w, "%s\n", schemaType(s))
			continue
		}
		required := map[string]bool{}
		if r, ok := s["required"].([]any); ok {
			for _, x := range r {
				required[x.(string)] = true
			}
		}
		var fields []string
		for f := range props {
			fields = append(fields, f)
		}
		sort.Strings(fields)
		fmt.Fprintf(&w, "| field | type | description |\n|---|---|---|\n")
		for _, f := range fields {
			p := props[f].(map[string]any)
			d, _ := p["description"].(string)
			req := ""
			if required[f] {
				req = " (always)"
			}
			fmt.Fprintf(&w, "| `%s`%s | %s | %s |\n", f, req, schemaType(p), d)
		}
	}
	return w.String()
}

// schemaType is a short human form of a schema: "[Issue](#issue)",
// "array of Issue", "string (uuid)", "one of: ...".
func schemaType(s map[string]any) string {
	if ref, ok := s["$ref"].(string); ok {
		n := ref[strings.LastIndex(ref, "/")+1:]
		return fmt.Sprintf("[%s](#%s)", n, strings.ToLower(n))
	}
	if all, ok := s["allOf"].([]any); ok && len(all) > 0 {
		out := schemaType(all[0].(map[string]any))
		if props, ok := s["properties"].(map[string]any); ok {
			if code, ok := props["code"].(map[string]any); ok {
				var cs []string
				for _, c := range code["enum"].([]any) {
					cs = append(cs, fmt.Sprintf("`%v`", c))
				}
				out += ", code " + strings.Join(cs, ", ")
			}
		}
		return out
	}
	if one, ok := s["oneOf"].([]any); ok {
		var parts []string
		for _, x := range one {
			parts = append(parts, schemaType(x.(map[string]any)))
		}
		return strings.Join(parts, " or ")
	}
	var t string
	switch v := s["type"].(type) {
	case string:
		t = v
	case []any:
		var parts []string
		for _, x := range v {
			parts = append(parts, fmt.Sprint(x))
		}
		t = strings.Join(parts, " or ")
	}
	if t == "array" {
		if it, ok := s["items"].(map[string]any); ok {
			return "array of " + schemaType(it)
		}
	}
	if f, ok := s["format"].(string); ok {
		t += " (" + f + ")"
	}
	if e, ok := s["enum"].([]any); ok {
		var parts []string
		for _, x := range e {
			parts = append(parts, fmt.Sprintf("`%v`", x))
		}
		t += ": " + strings.Join(parts, ", ")
	}
	return t
}

// anchor is the GitHub heading anchor of h.
func anchor(h string) string {
	h = strings.ToLower(h)
	var b strings.Builder
	for _, r := range h {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// TestOpenAPIPageLimit: every documented limit parameter says what
// pageParams does: a maximum of maxPageLimit in its schema, a description
// that names the 400 and promises no clamped page, and the route refuses
// maxPageLimit+1 with 400 naming limit while it serves maxPageLimit.
func TestOpenAPIPageLimit(t *testing.T) {
	t.Parallel()
	o := loadOpenAPI(t)
	b := setup(t)
	co := b.company("PL")
	iss := b.issue(co.ID, nil)
	var hook clasp.Webhook
	b.must(http.StatusCreated, "POST", "/api/companies/"+co.ID+"/webhooks", req{body: map[string]any{"url": "https://example.com/h", "events": []string{"*"}}}, &hook)
	n := 0
	for path, ops := range o.doc.Paths {
		for method, op := range ops {
			for _, prm := range op.Parameters {
				if prm.Name != "limit" || prm.In != "query" {
					continue
				}
				n++
				p := strings.ToUpper(method) + " " + path
				if max, _ := prm.Schema["maximum"].(float64); int(max) != maxPageLimit {
					t.Errorf("%s: limit's schema maximum is %v, want %d", p, prm.Schema["maximum"], maxPageLimit)
				}
				if !strings.Contains(prm.Description, "400") || strings.Contains(prm.Description, "are returned") {
					t.Errorf("%s: limit's description %q does not say that a limit above %d is a 400", p, prm.Description, maxPageLimit)
				}
				id := iss.ID
				if strings.HasPrefix(path, "/api/webhooks/") {
					id = hook.ID
				}
				url := strings.NewReplacer("{companyId}", co.ID, "{id}", id).Replace(path)
				wantErr(t, b.do(strings.ToUpper(method), url+"?limit="+strconv.Itoa(maxPageLimit+1), req{}), http.StatusBadRequest, clasp.CodeInvalidRequest, "limit")
				b.must(http.StatusOK, strings.ToUpper(method), url+"?limit="+strconv.Itoa(maxPageLimit), req{}, nil)
			}
		}
	}
	if n == 0 {
		t.Fatal("no operation documents a limit parameter")
	}
}

// whoMayCall is the "Who may call: ..." sentence of an operation's
// description, "" when it has none.
var whoMayCall = regexp.MustCompile(`Who may call: ([^.]*)\.`)

// TestOpenAPISaysWhoMayCall: every route's entry says who may call it,
// and what it says agrees with the route's access in routes.go: a
// board-only route names the board and no agent, an admin-only route the
// board with an admin token, an agent-only route an agent or run and not
// the board, a route open to both names both; the
// routes outside Server.handle are anyone's, without a credential.
func TestOpenAPISaysWhoMayCall(t *testing.T) {
	t.Parallel()
	o := loadOpenAPI(t)
	b := setup(t)
	for _, p := range append(append([]string(nil), b.srv.patterns...), fixedRoutes...) {
		method, path, _ := strings.Cut(p, " ")
		op := o.doc.Paths[path][strings.ToLower(method)]
		if op == nil {
			continue // TestOpenAPIRoutes reports it
		}
		m := whoMayCall.FindStringSubmatch(op.Description)
		if m == nil {
			t.Errorf("%s: its description does not say \"Who may call: ...\"", p)
			continue
		}
		who := m[1]
		board := strings.Contains(who, "board")
		agent := strings.Contains(who, "agent") || strings.Contains(who, "run")
		acc, handled := b.srv.access[p]
		var ok bool
		switch {
		case !handled:
			ok = strings.HasPrefix(who, "anyone")
		case acc == boardOnly:
			ok = board && !agent
		case acc == agentOnly:
			ok = agent && !board
		case acc == anyone:
			ok = board && agent
		case acc == adminOnly:
			ok = board && strings.Contains(who, "admin") && !agent
		case acc == gateOnly:
			ok = strings.Contains(who, "gate token") && !board && !agent
		}
		if !ok {
			t.Errorf("%s: the document says %q, which does not match the route's access in routes.go", p, m[0])
		}
	}
}
