package httpapi

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// The error body written by appendErrorBody is byte for byte json.Marshal
// of withRequestID: for a checkout conflict's details (strings and nulls),
// details of other types, nil and empty details, a requestId in the details
// that the request's id replaces, no request id, and strings that need
// escaping (quotes, backslashes, control characters, HTML characters,
// U+2028 and U+2029, invalid UTF-8, multi-byte runes).
func FuzzErrorBody(f *testing.F) {
	f.Add("Issue 3f6c2a90-5b1e-4c7d-9a2e-8d41f0b7c615 cannot be checked out: held by live run.", "checkout_conflict", "held_by_live_run", "rid-1")
	f.Add("", "", "", "")
	f.Add(`quote " backslash \ <b>&amp;</b>`, "x\u2028y\u2029z", "\x00\x01\x1f\b\f\n\r\t\x7f", "é€𝄞")
	f.Add("bad \xff utf8 \xc3", "\xe2\x82", "ok", "\xed\xa0\x80")
	f.Fuzz(func(t *testing.T, msg, code, s, rid string) {
		for _, details := range []map[string]any{
			{"issueId": s, "status": "in_progress", "assigneeAgentId": nil, "checkoutRunId": s, "executionRunId": nil, "reason": code},
			{"field": s, "n": 7, "list": []string{s, msg}, "nested": map[string]any{"a": s}, "flag": true},
			{"requestId": "old " + s},
			{},
			nil,
		} {
			body := errorBody{Error: msg, Code: code, Details: details}
			want, err := json.Marshal(withRequestID(body, rid))
			if err != nil {
				t.Fatal(err)
			}
			got := appendErrorBody(nil, body, rid)
			if !bytes.Equal(got, want) {
				t.Fatalf("appendErrorBody(%q, %q, %v, rid %q):\n got %s\nwant %s", msg, code, details, rid, got, want)
			}
			if utf8.Valid([]byte(msg)) && !json.Valid(got) {
				t.Fatalf("not valid JSON: %s", got)
			}
		}
	})
}
