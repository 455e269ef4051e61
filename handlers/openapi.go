package handlers

import (
	_ "embed"
	"net/http"
)

// openAPIDoc is the OpenAPI 3.1 document of every route that routes
// registers. TestOpenAPI_MatchesRoutes walks the router and fails when a
// route and the document disagree, so edit the two together.
//
//go:embed openapi.json
var openAPIDoc []byte

// handleOpenAPI serves GET /openapi.json: the document above, as is.
func (h *handler) handleOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDoc)
}
