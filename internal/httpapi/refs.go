package httpapi

import (
	"net/http"
	"strings"

	"github.com/clasp-dev/clasp"
)

// callerRef returns err naming the issue the way the caller named it. The
// stores name an issue by its UUID in their messages (the 409s of rules L1,
// L4 and L5: "Issue <uuid> cannot be checked out: ..."), but on a route
// /api/issues/{id}/... the caller may have used its identifier ("ACME-1");
// the message then says "Issue ACME-1 ..." while details.issueId keeps the
// UUID. Any other error, or a path that is a UUID, is returned as is.
func callerRef(r *http.Request, err error) error {
	ref := r.PathValue("id")
	if ref == "" || !strings.Contains(r.Pattern, "/issues/{id}") {
		return err
	}
	if _, isUUID := parseUUID(ref); isUUID {
		return err
	}
	e, ok := err.(*clasp.Error)
	if !ok {
		return err
	}
	id, _ := e.Details["issueId"].(string)
	if id == "" || !strings.Contains(e.Message, id) {
		return err
	}
	named := *e
	named.Message = strings.ReplaceAll(e.Message, id, ref)
	return &named
}
