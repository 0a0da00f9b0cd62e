package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
)

// decodeTarget is a request body with the shapes decodeJSON meets.
type decodeTarget struct {
	AgentID          *string             `json:"agentId"`
	ExpectedStatuses []clasp.IssueStatus `json:"expectedStatuses"`
	Unassign         bool                `json:"unassign"`
	ExitCode         *int                `json:"exitCode"`
	Raw              json.RawMessage     `json:"raw"`
}

func TestDecodeJSON(t *testing.T) {
	t.Parallel()
	const limit = 256
	for _, tc := range []struct {
		name      string
		body      string
		wantCode  string // "" for success
		wantField string
	}{
		{name: "OK", body: `{"agentId":"a","expectedStatuses":["todo"],"unassign":true,"exitCode":3}`},
		{name: "OKWhitespaceAfter", body: "{\"unassign\":false} \n\t "},
		{name: "OKNested", body: `{"raw":{"a":{"b":[1,{"c":2}]}}}`},
		{name: "OKNullRaw", body: `{"raw":null}`},
		{name: "Empty", body: ``, wantCode: clasp.CodeInvalidRequest},
		{name: "Malformed", body: `{"agentId": `, wantCode: clasp.CodeInvalidRequest},
		{name: "NotObject", body: `["todo"]`, wantCode: clasp.CodeInvalidRequest},
		{name: "Scalar", body: `"x"`, wantCode: clasp.CodeInvalidRequest},
		{name: "Null", body: `null`, wantCode: clasp.CodeInvalidRequest},
		{name: "TrailingGarbage", body: `{"unassign":true} trailing`, wantCode: clasp.CodeInvalidRequest},
		{name: "TwoValues", body: `{}{}`, wantCode: clasp.CodeInvalidRequest},
		{name: "UnknownField", body: `{"agentID":"x"}`, wantCode: clasp.CodeInvalidRequest, wantField: "agentID"},
		{name: "UnknownFieldOther", body: `{"foo":1}`, wantCode: clasp.CodeInvalidRequest, wantField: "foo"},
		{name: "DuplicateKey", body: `{"agentId":"a","agentId":"b"}`, wantCode: clasp.CodeInvalidRequest, wantField: "agentId"},
		{name: "CaseDuplicate", body: `{"unassign":true,"UNASSIGN":false}`, wantCode: clasp.CodeInvalidRequest, wantField: "UNASSIGN"},
		{name: "KelvinDuplicate", body: "{\"raw\":{\"k\":1,\"\u212a\":2}}", wantCode: clasp.CodeInvalidRequest, wantField: "raw.\u212a"},
		{name: "NestedDuplicate", body: `{"raw":{"a":1,"a":2}}`, wantCode: clasp.CodeInvalidRequest, wantField: "raw.a"},
		{name: "WrongTypeString", body: `{"agentId":5}`, wantCode: clasp.CodeInvalidRequest, wantField: "agentId"},
		{name: "WrongTypeBool", body: `{"unassign":"yes"}`, wantCode: clasp.CodeInvalidRequest, wantField: "unassign"},
		{name: "WrongTypeArray", body: `{"expectedStatuses":"todo"}`, wantCode: clasp.CodeInvalidRequest, wantField: "expectedStatuses"},
		{name: "WrongTypeElement", body: `{"expectedStatuses":[1]}`, wantCode: clasp.CodeInvalidRequest, wantField: "expectedStatuses"},
		{name: "FloatForInt", body: `{"exitCode":1.5}`, wantCode: clasp.CodeInvalidRequest, wantField: "exitCode"},
		{name: "HugeNumber", body: `{"exitCode":1e999}`, wantCode: clasp.CodeInvalidRequest, wantField: "exitCode"},
		{name: "InvalidUTF8", body: "{\"agentId\":\"\xff\xfe\"}", wantCode: clasp.CodeInvalidRequest},
		{name: "LoneHighSurrogate", body: `{"agentId":"\ud800"}`, wantCode: clasp.CodeInvalidRequest},
		{name: "LoneHighSurrogateUpper", body: `{"agentId":"a\uDBFFb"}`, wantCode: clasp.CodeInvalidRequest},
		{name: "LoneLowSurrogate", body: `{"agentId":"\udc00"}`, wantCode: clasp.CodeInvalidRequest},
		{name: "ReversedSurrogates", body: `{"agentId":"\ude00\ud83d"}`, wantCode: clasp.CodeInvalidRequest},
		{name: "TwoHighSurrogates", body: `{"agentId":"\ud83d\ud83d"}`, wantCode: clasp.CodeInvalidRequest},
		{name: "HighSurrogateThenEscape", body: `{"agentId":"\ud83d\n"}`, wantCode: clasp.CodeInvalidRequest},
		{name: "NestedLoneSurrogate", body: `{"raw":{"a":["x","\udfff"]}}`, wantCode: clasp.CodeInvalidRequest},
		{name: "LoneSurrogateAfterEscapedBackslash", body: `{"agentId":"\\\ud800"}`, wantCode: clasp.CodeInvalidRequest},
		{name: "OKSurrogatePair", body: `{"agentId":"\ud83d\ude00"}`},
		{name: "OKSurrogatePairAfterEscapedBackslash", body: `{"agentId":"\\\ud83d\ude00 \u00e9"}`},
		{name: "OKEscapedBackslashNotEscape", body: `{"agentId":"\\ud800 \\udc00"}`},
		{name: "OKSurrogateTextOutsideString", body: `{"raw":{"ud800":1},"agentId":"\"\\"}`},
		{name: "TooDeep", body: `{"raw":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`, wantCode: clasp.CodeInvalidRequest},
		{name: "TooLarge", body: `{"agentId":"` + strings.Repeat("a", limit+1) + `"}`, wantCode: clasp.CodeBodyTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var v decodeTarget
			err := decodeJSON(http.MaxBytesReader(nil, io.NopCloser(strings.NewReader(tc.body)), limit), &v)
			if tc.wantCode == "" {
				if err != nil {
					t.Fatalf("decodeJSON(%q) = %v, want nil", tc.body, err)
				}
				return
			}
			e := clasp.AsError(err)
			if e == nil {
				t.Fatalf("decodeJSON(%q) = %v, want a *clasp.Error with code %s", tc.body, err, tc.wantCode)
			}
			if e.Code != tc.wantCode {
				t.Errorf("decodeJSON(%q) code = %s, want %s (%v)", tc.body, e.Code, tc.wantCode, e)
			}
			if got := e.Details["field"]; tc.wantField != "" && got != tc.wantField {
				t.Errorf("decodeJSON(%q) details.field = %v, want %q", tc.body, got, tc.wantField)
			}
		})
	}
}

func TestDecodeJSONNullRawMessage(t *testing.T) {
	t.Parallel()
	var v issueUpdateIn
	if err := decodeJSONBytes([]byte(`{"assigneeAgentId":null}`), &v); err != nil {
		t.Fatal(err)
	}
	if err := v.validate(); err != nil {
		t.Fatal(err)
	}
	if v.assignee == nil || *v.assignee != "" {
		t.Fatalf("assignee = %v, want pointer to empty (unassign)", v.assignee)
	}
}

func TestDecodeJSONReadOnlyField(t *testing.T) {
	t.Parallel()
	var v issueUpdateIn
	err := decodeJSONBytes([]byte(`{"checkoutEpoch":7}`), &v)
	if e := clasp.AsError(err); e == nil || e.Code != clasp.CodeInvalidRequest || e.Details["field"] != "checkoutEpoch" || !strings.Contains(e.Message, "read-only") {
		t.Fatalf("got %v, want invalid_request read-only naming checkoutEpoch", err)
	}
}

func TestFoldKey(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]string{{"agentId", "AGENTID"}, {"k", "\u212a"}, {"s", "\u017f"}, {"straße", "STRASSE"}} {
		same := foldKey(pair[0]) == foldKey(pair[1])
		if want := strings.EqualFold(pair[0], pair[1]); same != want {
			t.Errorf("foldKey(%q) == foldKey(%q) is %v, want %v (strings.EqualFold)", pair[0], pair[1], same, want)
		}
	}
}

// FuzzDecodeJSON checks that decodeJSON never panics and that every error is
// a *clasp.Error with code invalid_request or body_too_large (S26).
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		`{"agentId":"8c7f8e8a-3c1e-4a44-9d3c-6b1f0f0c2a11","expectedStatuses":["todo","backlog"]}`,
		`{"unassign":true}`, `{}`, ``, `{"a":1,"A":2}`, `{"raw":{"x":[1,2,{"y":null}]}}`, `{} x`,
		"{\"agentId\":\"\xff\"}", `{"exitCode":1e400}`, `[[[[`, `{"expectedStatuses":[1,"todo"]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v decodeTarget
		err := decodeJSON(http.MaxBytesReader(nil, io.NopCloser(bytes.NewReader(data)), 4096), &v)
		if err == nil {
			if len(data) > 4096 {
				t.Fatalf("accepted a body of %d bytes over the 4096 cap", len(data))
			}
			return
		}
		e, ok := err.(*clasp.Error)
		if !ok {
			t.Fatalf("error %T %v is not a *clasp.Error", err, err)
		}
		if e.Code != clasp.CodeInvalidRequest && e.Code != clasp.CodeBodyTooLarge {
			t.Fatalf("code %s, want invalid_request or body_too_large", e.Code)
		}
		if e.Message == "" {
			t.Fatal("empty message")
		}
	})
}

// structureCases are bodies for the two paths of checkJSONStructure, with
// whether the fast path (plainObjectKeys) takes them.
var structureCases = []struct {
	body string
	fast bool
}{
	{`{"agentId":"8c7f8e8a-3c1e-4a44-9d3c-6b1f0f0c2a11","expectedStatuses":["todo","backlog"]}`, true},
	{`{}`, true},
	{" \t\n{ \"a\" : 1 , \"b\":[true,false,null,-1.5e3,{\"c\":{}}]}\r\n", true},
	{`{"raw":{"x":[1,2,{"y":null}]},"s":"a,b]}\"c\\"}`, true},
	{`{"a":{"a":1},"b":{"a":2}}`, true}, // the same key in two objects is no duplicate
	{`{"a":1,"A":2}`, false},            // duplicate regardless of case
	{`{"a":{"x":1,"X":2}}`, false},      // nested duplicate
	{`{"\u0061":1}`, false},             // escaped key
	{`{"ä":1}`, false},                  // non-ASCII key
	{`{} x`, false},
	{`{"a":1}{"b":2}`, false},
	{`[1,2]`, false},
	{`"x"`, false},
	{``, false},
	{`{"a":`, false},
	{`{"a":1,}`, false},
	{strings.Repeat(`{"a":`, 31) + "1" + strings.Repeat("}", 31), true},
	{strings.Repeat(`{"a":`, 32) + "1" + strings.Repeat("}", 32), true},
	{strings.Repeat(`{"a":`, 33) + "1" + strings.Repeat("}", 33), false}, // deeper than maxJSONDepth
	{`{"a":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`, false},
}

// TestCheckJSONStructureFastPath checks that the fast path takes the plain
// bodies, and that whatever it answers is what the token path answers.
func TestCheckJSONStructureFastPath(t *testing.T) {
	for _, tc := range structureCases {
		keys, ok := plainObjectKeys([]byte(tc.body))
		if ok != tc.fast {
			t.Errorf("plainObjectKeys(%q) took it %v, want %v", tc.body, ok, tc.fast)
			continue
		}
		want, werr := checkJSONTokens([]byte(tc.body))
		if ok {
			if werr != nil || !slices.Equal(keys, want) {
				t.Errorf("plainObjectKeys(%q) = %q; the token path says %q, %v", tc.body, keys, want, werr)
			}
			continue
		}
		got, gerr := checkJSONStructure([]byte(tc.body))
		if !slices.Equal(got, want) || fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Errorf("checkJSONStructure(%q) = %q, %v; want %q, %v", tc.body, got, gerr, want, werr)
		}
	}
}

// FuzzCheckJSONStructure checks on any input that checkJSONStructure's
// fast path answers exactly what the token path does whenever it answers.
//
//	go test ./internal/httpapi -run '^$' -fuzz FuzzCheckJSONStructure -fuzztime 30s
func FuzzCheckJSONStructure(f *testing.F) {
	for _, tc := range structureCases {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, ok := plainObjectKeys(data)
		if !ok {
			return
		}
		want, err := checkJSONTokens(data)
		if err != nil || !slices.Equal(keys, want) {
			t.Fatalf("plainObjectKeys(%q) = %q; the token path says %q, %v", data, keys, want, err)
		}
	})
}

// BenchmarkDecodeJSONCheckout decodes a checkout body as every checkout
// request does.
//
//	go test ./internal/httpapi -run '^$' -bench DecodeJSONCheckout -benchmem
func BenchmarkDecodeJSONCheckout(b *testing.B) {
	body := []byte(`{"agentId":"8c7f8e8a-3c1e-4a44-9d3c-6b1f0f0c2a11","expectedStatuses":["todo","backlog"]}`)
	b.ReportAllocs()
	for b.Loop() {
		var in struct {
			AgentID          *string             `json:"agentId"`
			ExpectedStatuses []clasp.IssueStatus `json:"expectedStatuses"`
		}
		if err := decodeJSONBytes(body, &in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteJSONIssue encodes an issue answer as every lock rule's
// answer is.
//
//	go test ./internal/httpapi -run '^$' -bench WriteJSONIssue -benchmem
func BenchmarkWriteJSONIssue(b *testing.B) {
	now := time.Date(2026, 12, 1, 18, 0, 0, 123456000, time.UTC)
	run := "0b5d1c3e-8f7a-4c2b-9e6d-1a2b3c4d5e6f"
	iss := &clasp.Issue{ID: "8c7f8e8a-3c1e-4a44-9d3c-6b1f0f0c2a11", CompanyID: "1c7f8e8a-3c1e-4a44-9d3c-6b1f0f0c2a11",
		Identifier: "BN-12", Title: "Bench issue", Status: clasp.IssueInProgress, CheckoutRunID: &run, ExecutionRunID: &run,
		CreatedAt: now, UpdatedAt: now}
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		writeJSON(w, http.StatusOK, iss)
	}
}

// discardWriter is an http.ResponseWriter that keeps headers and drops the body.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}

// issueJSONCase builds an issue from fuzzable parts: s fills the strings
// (and, when set, the pointers), sec and nsec the times, zone their
// offset in seconds.
func issueJSONCase(s string, set bool, epoch, sec, nsec int64, zone int) *clasp.Issue {
	loc := time.UTC
	if zone != 0 {
		loc = time.FixedZone("z", zone)
	}
	t := time.Unix(sec, nsec).In(loc)
	iss := &clasp.Issue{ID: s, CompanyID: s + "c", Identifier: "B-" + s, Title: s, Description: s + "\n" + s,
		Status: clasp.IssueStatus(s), Priority: clasp.Priority(s), CheckoutEpoch: epoch, CreatedAt: t, UpdatedAt: t.Add(time.Duration(nsec))}
	if set {
		p, t2 := s+"p", t.Add(-time.Duration(sec))
		iss.AssigneeAgentID, iss.CheckoutRunID, iss.ExecutionRunID, iss.ExecutionAgentNameKey = &s, &p, &s, &p
		iss.ExecutionLockedAt, iss.StartedAt, iss.CompletedAt, iss.CancelledAt = &t, &t2, &t, &t2
	}
	return iss
}

// checkIssueJSON fails unless writeJSON answers iss with the bytes
// json.Marshal gives (and a newline), or iss does not marshal and the
// fast path is not taken.
func checkIssueJSON(t *testing.T, iss *clasp.Issue) {
	t.Helper()
	want, err := json.Marshal(iss)
	if err != nil {
		if issueEncodable(iss) {
			t.Fatalf("json.Marshal refuses %+v (%v), but issueEncodable accepts it", iss, err)
		}
		return
	}
	if !issueEncodable(iss) {
		t.Fatalf("issueEncodable refuses %+v, which json.Marshal writes", iss)
	}
	if got := appendIssueJSON(nil, iss); !bytes.Equal(got, want) {
		t.Fatalf("appendIssueJSON:\n got %s\nwant %s", got, want)
	}
	rec := &bodyRecorder{h: http.Header{}}
	writeJSON(rec, http.StatusOK, iss)
	if !bytes.Equal(rec.body.Bytes(), append(want, '\n')) {
		t.Fatalf("writeJSON:\n got %s\nwant %s", rec.body.Bytes(), want)
	}
}

// bodyRecorder is a minimal http.ResponseWriter keeping the body.
type bodyRecorder struct {
	h    http.Header
	body bytes.Buffer
}

func (b *bodyRecorder) Header() http.Header         { return b.h }
func (b *bodyRecorder) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *bodyRecorder) WriteHeader(int)             {}

func TestIssueJSONMatchesMarshal(t *testing.T) {
	strs := []string{"", "plain", `q"uote\back`, "<a&b>", "ctl\x00\x01\x1f\t\r\b\f", "line\u2028sep\u2029", "bad\xff\xfeutf8", "ünï©ødé 日本"}
	for _, s := range strs {
		for _, set := range []bool{false, true} {
			for _, tm := range []struct {
				sec, nsec int64
				zone      int
			}{{1764633600, 0, 0}, {1764633600, 123456789, 0}, {1764633600, 120000000, 3600}, {0, 1, -5*3600 - 1800},
				{-62135596800, 0, 0}, {253402300799, 999999999, 0}, {253402300800, 0, 0}, {-62135596801, 0, 0},
				{1764633600, 5, 24 * 3600}, {1764633600, 5, 23*3600 + 3599}, {1764633600, 5, -24 * 3600}} {
				checkIssueJSON(t, issueJSONCase(s, set, -3, tm.sec, tm.nsec, tm.zone))
			}
		}
	}
}

func FuzzIssueJSON(f *testing.F) {
	f.Add("x", true, int64(1), int64(1764633600), int64(123), 0)
	f.Add("<\u2028\xff>", false, int64(-1), int64(-62135596801), int64(0), 86399)
	f.Fuzz(func(t *testing.T, s string, set bool, epoch, sec, nsec int64, zone int) {
		checkIssueJSON(t, issueJSONCase(s, set, epoch, sec, nsec, zone%(30*3600)))
	})
}

// TestLoneSurrogateEscapeOverHTTP: an issue create whose title escapes a
// lone UTF-16 surrogate is refused with the very answer a body of invalid
// UTF-8 gets, and creates nothing; a surrogate pair and an escaped
// backslash before "ud800" are ordinary text.
func TestLoneSurrogateEscapeOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.company("LS")
	path := "/api/companies/" + c.ID + "/issues"
	strip := func(e errorBody) errorBody {
		delete(e.Details, "requestId")
		return e
	}
	want := strip(wantErr(t, b.do("POST", path, req{raw: []byte("{\"title\":\"\xed\xa0\x80\"}")}), http.StatusBadRequest, clasp.CodeInvalidRequest, ""))
	for _, body := range []string{`{"title":"\ud800"}`, `{"title":"\udc00"}`, `{"title":"\ude00\ud83d"}`, `{"title":"ok \uD83D"}`} {
		got := strip(wantErr(t, b.do("POST", path, req{raw: []byte(body)}), http.StatusBadRequest, clasp.CodeInvalidRequest, ""))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("POST %s: answer %+v, want the invalid UTF-8 answer %+v", body, got, want)
		}
	}
	var l []clasp.Issue
	b.must(http.StatusOK, "GET", path, req{}, &l)
	if len(l) != 0 {
		t.Fatalf("%d issues after the refused creates, want none", len(l))
	}
	for body, title := range map[string]string{
		`{"title":"\ud83d\ude00"}`: "\U0001F600",
		`{"title":"\\ud800"}`:      `\ud800`,
	} {
		var iss clasp.Issue
		b.must(http.StatusCreated, "POST", path, req{raw: []byte(body)}, &iss)
		if iss.Title != title {
			t.Errorf("POST %s: title %q, want %q", body, iss.Title, title)
		}
	}
}
