package handlers

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// openAPIDoc is the OpenAPI 3.1 document of every route that routes
// registers. TestOpenAPI_MatchesRoutes walks the router and fails when a
// route and the document disagree, so edit the two together. Its
// info.version is a placeholder: New serves the document with this sked's
// version there (see openAPIVersioned).
//
//go:embed openapi.json
var openAPIDoc []byte

// openAPIVersioned returns openAPIDoc with info.version set to version,
// re-encoded: indented, keys sorted, numbers as written.
func openAPIVersioned(version string) ([]byte, error) {
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(openAPIDoc))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("read openapi.json: %w", err)
	}
	info, ok := doc["info"].(map[string]any)
	if !ok {
		return nil, errors.New("openapi.json has no info object")
	}
	info["version"] = version
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // the prose has <, > and &
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("write openapi.json: %w", err)
	}
	return out.Bytes(), nil
}

// handleOpenAPI serves GET /openapi.json: the document above, with this
// sked's version.
func (h *handler) handleOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(h.openAPI)
}
