package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/sked-dev/sked/db"
)

// handleRunList serves GET /jobs/{id}/runs?limit=&cursor=: a JSON array of
// the job's runs, newest first. When there are more, the response carries the
// next cursor in Sked-Next-Cursor and a Link header with rel="next".
func (h *handler) handleRunList(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	q, err := queryParams(r, "limit", "cursor")
	if err != nil {
		h.error(w, r, err)
		return
	}
	p := db.RunListParams{JobID: id}
	if p.Limit, err = parseLimit(q["limit"]); err != nil {
		h.error(w, r, err)
		return
	}
	if c := q["cursor"]; c != "" {
		p.Cursor, err = strconv.ParseInt(c, 10, 64)
		if err != nil || p.Cursor < 1 {
			h.error(w, r, &requestError{
				Status: http.StatusBadRequest, Field: "cursor",
				Msg: fmt.Sprintf("cursor %q is not a run cursor; pass the Sked-Next-Cursor of the previous page", c),
			})
			return
		}
	}
	runs, next, err := h.store.RunList(r.Context(), p)
	if err != nil {
		h.error(w, r, jobError(id, action{}, queryError(err)))
		return
	}
	if runs == nil {
		runs = []db.Run{}
	}
	if next != 0 {
		w.Header().Set("Sked-Next-Cursor", strconv.FormatInt(next, 10))
		w.Header().Set("Link", fmt.Sprintf(`</jobs/%s/runs?cursor=%d&limit=%d>; rel="next"`, url.PathEscape(id), next, p.Limit))
	}
	h.writeJSON(w, r, http.StatusOK, runs)
}
