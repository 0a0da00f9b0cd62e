package httpapi

import (
	"net/http"
	"testing"

	"github.com/clasp-dev/clasp"
)

// Archive and restore over HTTP: a body other than {} is refused and
// changes nothing; a company-scoped token's list leaves its archived
// company out as the board's does; includeArchived takes one boolean.
func TestCompanyArchiveOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("AR")
	path := "/api/companies/" + w.c.ID
	for _, body := range []string{`x`, `{"foo":1}`, `{"x":`, `[]`} {
		wantErr(t, b.do("POST", path+"/archive", req{raw: []byte(body)}), http.StatusBadRequest, clasp.CodeInvalidRequest, "")
	}
	var co clasp.Company
	b.must(http.StatusOK, "GET", path, req{}, &co)
	if co.ArchivedAt != nil {
		t.Fatalf("a refused archive archived the company")
	}
	b.must(http.StatusOK, "POST", path+"/archive", req{raw: []byte(`{}`)}, &co)
	if co.ArchivedAt == nil {
		t.Fatalf("archive with {}: archivedAt is null")
	}

	scoped := b.operatorToken("viewer", w.c.ID)
	var list []clasp.Company
	b.must(http.StatusOK, "GET", "/api/companies", req{token: scoped.Token}, &list)
	if len(list) != 0 {
		t.Errorf("a scoped token lists its archived company: %+v", list)
	}
	b.must(http.StatusOK, "GET", "/api/companies?includeArchived=true", req{token: scoped.Token}, &list)
	if len(list) != 1 || list[0].ID != w.c.ID {
		t.Errorf("a scoped token's list with includeArchived=true: %+v", list)
	}
	wantErr(t, b.do("GET", "/api/companies?includeArchived=maybe", req{}), http.StatusBadRequest, clasp.CodeInvalidRequest, "includeArchived")
	wantErr(t, b.do("GET", "/api/companies?includeArchived=true&includeArchived=false", req{}), http.StatusBadRequest, clasp.CodeInvalidRequest, "includeArchived")
	b.must(http.StatusOK, "POST", path+"/unarchive", req{}, &co)
	if co.ArchivedAt != nil {
		t.Errorf("unarchive: archivedAt %v", co.ArchivedAt)
	}
}

// The issue list's filters are given once each; parentId takes an
// identifier as well as an id, within the company.
func TestIssueListFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("FL")
	other := b.world("OT")
	top := b.issue(w.c.ID, map[string]any{"title": "top", "status": "todo"})
	child := b.issue(w.c.ID, map[string]any{"title": "child", "status": "todo", "parentId": top.ID})
	theirs := b.issue(other.c.ID, map[string]any{"title": "theirs", "status": "todo"})
	base := "/api/companies/" + w.c.ID + "/issues"
	for _, q := range []string{"ready=true&ready=false", "status=todo&status=done", "q=a&q=b", "parentId=" + top.ID + "&parentId=" + top.ID} {
		wantErr(t, b.do("GET", base+"?"+q, req{}), http.StatusBadRequest, clasp.CodeInvalidRequest, "")
	}
	var kids []clasp.Issue
	b.must(http.StatusOK, "GET", base+"?parentId="+top.Identifier, req{}, &kids)
	if len(kids) != 1 || kids[0].ID != child.ID {
		t.Errorf("?parentId=%s lists %d issues, want %s", top.Identifier, len(kids), child.Identifier)
	}
	// Another company's issue, or none, filters to no rows, by identifier as by id.
	for _, ref := range []string{theirs.Identifier, theirs.ID, "ZZ-999", "00000000-0000-0000-0000-000000000000"} {
		var none []clasp.Issue
		b.must(http.StatusOK, "GET", base+"?parentId="+ref, req{}, &none)
		if len(none) != 0 {
			t.Errorf("?parentId=%s lists %d issues, want none", ref, len(none))
		}
	}
	wantErr(t, b.do("GET", base+"?parentId=not+an+issue", req{}), http.StatusBadRequest, clasp.CodeInvalidRequest, "parentId")
}
