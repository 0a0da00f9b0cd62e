package httpapi

import (
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
)

// A company's template read is reused for less than templateTTL, and
// forget drops it at once.
func TestTemplateCache(t *testing.T) {
	var tc templateCache
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, ok := tc.get("c1", t0); ok {
		t.Fatal("an empty cache answered")
	}
	tc.put("c1", &clasp.Company{BranchTemplate: "agents/{identifier}", IssuePrefix: "ACME"}, t0)
	if got, ok := tc.get("c1", t0.Add(templateTTL-time.Millisecond)); !ok || got.tmpl != "agents/{identifier}" || got.prefix != "ACME" {
		t.Errorf("within the TTL: %+v, %v", got, ok)
	}
	if _, ok := tc.get("c1", t0.Add(templateTTL)); ok {
		t.Error("an entry as old as the TTL was used")
	}
	if _, ok := tc.get("c2", t0); ok {
		t.Error("another company's entry was used")
	}
	tc.forget("c1", t0.Add(time.Second))
	if _, ok := tc.get("c1", t0); ok {
		t.Error("a forgotten entry was used")
	}
	// A read that began before the forget (it may have seen the old
	// template) is not kept; one that began after it is.
	tc.put("c1", &clasp.Company{BranchTemplate: "old/{identifier}"}, t0.Add(time.Second-time.Millisecond))
	if _, ok := tc.get("c1", t0.Add(time.Second)); ok {
		t.Error("a read begun before the forget was cached")
	}
	tc.put("c1", &clasp.Company{BranchTemplate: "new/{identifier}"}, t0.Add(time.Second+time.Millisecond))
	if got, ok := tc.get("c1", t0.Add(time.Second+2*time.Millisecond)); !ok || got.tmpl != "new/{identifier}" {
		t.Errorf("a read begun after the forget: %+v, %v", got, ok)
	}
}
