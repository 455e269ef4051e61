package handlers

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/wire"
)

// handleRunList serves GET /jobs/{id}/runs?limit=&cursor=: a JSON array of
// the job's runs, newest first, paged by jobPage.
func (h *handler) handleRunList(w http.ResponseWriter, r *http.Request) {
	jobPage(h, w, r, "runs", func(ctx context.Context, p pageParams) ([]db.Run, int64, error) {
		return h.store.RunList(ctx, db.RunListParams{JobID: p.id, Limit: p.limit, Cursor: p.cursor})
	})
}

// handleEventList serves GET /jobs/{id}/events?limit=&cursor=: a JSON array
// of the job's timeline (changes of its definition and who made them,
// firings that gave up, recoveries), newest first, paged by jobPage.
func (h *handler) handleEventList(w http.ResponseWriter, r *http.Request) {
	jobPage(h, w, r, "events", func(ctx context.Context, p pageParams) ([]db.Event, int64, error) {
		return h.store.EventList(ctx, db.EventListParams{JobID: p.id, Limit: p.limit, Cursor: p.cursor})
	})
}

// pageParams asks for a page of the job id's runs or events.
type pageParams struct {
	id     string
	limit  int
	cursor int64 // the Sked-Next-Cursor of the previous page; 0 for the first
}

// jobPage answers GET /jobs/{id}/<what>?limit=&cursor= with the JSON array
// list reads, newest first. When there are more, the response carries the
// next cursor in Sked-Next-Cursor and a Link header with rel="next"
// (nextPage); a bare array has no room for it in the body.
func jobPage[T any](h *handler, w http.ResponseWriter, r *http.Request, what string, list func(context.Context, pageParams) ([]T, int64, error)) {
	p := pageParams{id: chi.URLParam(r, "id")}
	q, err := queryParams(r, "limit", "cursor")
	if err == nil {
		p.limit, err = parseLimit(q["limit"])
	}
	if err != nil {
		h.error(w, r, err)
		return
	}
	if c := q["cursor"]; c != "" {
		p.cursor, err = strconv.ParseInt(c, 10, 64)
		if err != nil || p.cursor < 1 {
			h.error(w, r, &requestError{
				Status: http.StatusBadRequest, Field: "cursor",
				Msg: fmt.Sprintf("cursor %q is not a cursor of %s; pass the Sked-Next-Cursor of the previous page", c, what),
			})
			return
		}
	}
	items, next, err := list(r.Context(), p)
	if err != nil {
		h.error(w, r, jobError(p.id, action{}, queryError(err)))
		return
	}
	if items == nil {
		items = []T{}
	}
	if next != 0 {
		nextPage(w, r, strconv.FormatInt(next, 10), p.limit)
	}
	h.writeJSON(w, r, http.StatusOK, items)
}

// nextPage points the answer to r, a page of a list, at the page after it,
// whose cursor is next: in Sked-Next-Cursor, and in a Link header with
// rel="next" to r's own path (under the API's mount prefix) and query (its
// filters) with that cursor and limit.
func nextPage(w http.ResponseWriter, r *http.Request, next string, limit int) {
	q := r.URL.Query()
	q.Set("cursor", next)
	q.Set("limit", strconv.Itoa(limit))
	w.Header().Set(wire.NextCursorHeader, next)
	w.Header().Set("Link", "<"+mountPrefix(r)+r.URL.EscapedPath()+"?"+q.Encode()+`>; rel="next"`)
}
