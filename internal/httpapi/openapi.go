package httpapi

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the OpenAPI 3.1 document of every route this package
// serves (openapi.json beside this file, embedded). TestOpenAPIRoutes fails
// when a route has no entry in it or an entry has no route; every response
// the package's tests receive is checked against its schemas; docs/api.md
// is generated from it.
//
//go:embed openapi.json
var openAPIDocument []byte

// handleOpenAPI answers GET /api/openapi.json with the document, to anyone
// (it holds no data).
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(openAPIDocument)
}
