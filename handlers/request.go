package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/wire"
)

// decodeBody reads r's body, at most h.maxBodyBytes of it, as the single
// JSON object v. Unknown fields, wrong types, trailing data and anything that
// is not JSON are refused with an error that says which field and how to fix
// it: 400 when the body is not a JSON object at all, 422 (a
// *db.ValidationError) for a field, 413 when it is too big and 415 unless the
// Content-Type is application/json. Requiring the Content-Type keeps web
// pages out: a browser sends application/json to another origin only after
// a CORS preflight, which sked does not answer.
func (h *handler) decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	return h.decodeBodyAs(w, r, v, "application/json")
}

// decodeBodyAs is decodeBody for a body of one of the media types given
// (none of which a form can send).
func (h *handler) decodeBodyAs(w http.ResponseWriter, r *http.Request, v any, types ...string) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return &requestError{
			Status: http.StatusUnsupportedMediaType,
			Msg:    "request body has no Content-Type; send it as Content-Type: " + types[0],
		}
	}
	if mt, _, err := mime.ParseMediaType(ct); err != nil || !slices.Contains(types, mt) {
		return &requestError{
			Status: http.StatusUnsupportedMediaType,
			Msg:    fmt.Sprintf("Content-Type %q is not supported; send %s", ct, strings.Join(types, " or ")),
		}
	}
	return decodeJSON(http.MaxBytesReader(w, r.Body, h.maxBodyBytes), v)
}

// hasBody reports whether r has a body that is more than white space,
// reading it (at most h.maxBodyBytes) and putting it back for decodeBody;
// a chunked body may be empty too, which ContentLength does not tell.
func (h *handler) hasBody(w http.ResponseWriter, r *http.Request) (bool, error) {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return false, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBodyBytes))
	if err != nil {
		return false, decodeError(err, nil)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return len(bytes.TrimLeft(body, " \t\r\n")) > 0, nil
}

// noBody refuses a body sent to a route that takes none (a control such
// as POST /jobs/{id}/trigger), before the route's handler: a field is
// refused (422) naming it, rather than ignored (a trigger given a runAt
// would run now), and a body that is not JSON as decodeBody refuses it.
// No body, white space and {} pass.
func (h *handler) noBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		has, err := h.hasBody(w, r)
		if err == nil && has {
			err = h.decodeBody(w, r, &struct{}{})
		}
		if err != nil {
			var ve *db.ValidationError
			if errors.As(err, &ve) && strings.HasPrefix(ve.Msg, "unknown field ") {
				route := r.Method + " " + chi.RouteContext(r.Context()).RoutePattern()
				ve.Msg = fmt.Sprintf("unknown field %q; %s takes no body: send none", ve.Field, route)
			}
			h.error(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// decodeJSON reads rd as the single JSON object v, refusing what decodeBody
// refuses, and (400) a body that is not UTF-8: JSON text is UTF-8 (RFC
// 8259), and a byte that is not would reach the store as it is (in a raw
// field such as payload), where PostgreSQL refuses it.
func decodeJSON(rd io.Reader, v any) error {
	body, err := io.ReadAll(rd)
	if err != nil {
		return decodeError(err, v)
	}
	if i, nul := db.TextFault(string(body)); i >= 0 && !nul { // a raw NUL is a JSON syntax error
		return &requestError{
			Status: http.StatusBadRequest,
			Msg:    fmt.Sprintf("request body is not UTF-8 text: byte %d is %#x; JSON text must be UTF-8 (RFC 8259)", i, body[i]),
		}
	}
	if bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("n")) {
		// null decodes into an object as nothing at all.
		return &requestError{Status: http.StatusBadRequest, Msg: "request body must be a JSON object, not null"}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, v)
	}
	// One object and nothing after it but white space.
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		return &requestError{
			Status: http.StatusBadRequest,
			Msg:    fmt.Sprintf("request body has data after the JSON object at offset %d; send one JSON object", dec.InputOffset()),
		}
	}
	return nil
}

// decodeError turns an error of json.Decoder decoding into v into a problem a
// person can act on.
func decodeError(err error, v any) error {
	var (
		maxErr  *http.MaxBytesError
		synErr  *json.SyntaxError
		typeErr *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &maxErr):
		return &requestError{
			Status: http.StatusRequestEntityTooLarge,
			Msg:    fmt.Sprintf("request body is larger than the limit of %d bytes", maxErr.Limit),
		}
	case errors.Is(err, io.EOF):
		return &requestError{Status: http.StatusBadRequest, Msg: "request body is empty; send a JSON object"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &requestError{Status: http.StatusBadRequest, Msg: "request body is not valid JSON: it ends before the JSON object is complete"}
	case errors.As(err, &synErr):
		return &requestError{
			Status: http.StatusBadRequest,
			Msg:    fmt.Sprintf("request body is not valid JSON: %s at offset %d", synErr.Error(), synErr.Offset),
		}
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return &requestError{
				Status: http.StatusBadRequest,
				Msg:    fmt.Sprintf("request body must be a JSON object, not %s", jsonKind(typeErr.Value)),
			}
		}
		return &db.ValidationError{
			Field: typeErr.Field,
			Msg:   fmt.Sprintf("field %s must be %s, not %s", typeErr.Field, goKind(typeErr), jsonKind(typeErr.Value)),
		}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		return &db.ValidationError{
			Field: name,
			Msg:   fmt.Sprintf("unknown field %q; allowed fields are %s", name, strings.Join(wire.FieldNames(v), ", ")),
		}
	default:
		return &requestError{Status: http.StatusBadRequest, Msg: "request body could not be read: " + err.Error()}
	}
}

// jsonKind names the JSON value json.UnmarshalTypeError.Value describes.
func jsonKind(value string) string {
	switch value {
	case "string":
		return "a string"
	case "number":
		return "a number"
	case "bool":
		return "true or false"
	case "array":
		return "an array"
	case "object":
		return "an object"
	}
	return strings.TrimPrefix(value, "number ") // "number 1.5": the number itself
}

// goKind names the JSON value the field wants.
func goKind(e *json.UnmarshalTypeError) string {
	t := e.Type
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if strings.HasPrefix(e.Value, "number") {
			return "a whole number"
		}
		return "a number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// queryParams returns r's query parameters, refusing (400) any not in
// allowed and any given twice, so that a typo such as ?status=ready is an
// error rather than an unfiltered answer, and any whose value is not text
// every store keeps (db.CheckText), which no job's field holds.
func queryParams(r *http.Request, allowed ...string) (map[string]string, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, &requestError{Status: http.StatusBadRequest, Msg: "query string is malformed: " + err.Error()}
	}
	out := make(map[string]string, len(q))
	for name, vals := range q {
		known := false
		for _, a := range allowed {
			known = known || a == name
		}
		if !known {
			allows := "this route takes none"
			if len(allowed) > 0 {
				allows = "allowed are " + strings.Join(allowed, ", ")
			}
			return nil, &requestError{
				Status: http.StatusBadRequest, Field: name,
				Msg: fmt.Sprintf("unknown query parameter %q; %s", name, allows),
			}
		}
		if len(vals) > 1 {
			return nil, &requestError{
				Status: http.StatusBadRequest, Field: name,
				Msg: fmt.Sprintf("query parameter %q is given %d times; give it once", name, len(vals)),
			}
		}
		if err := db.CheckText(name, vals[0]); err != nil { // no job holds it; PostgreSQL refuses it
			return nil, queryError(err)
		}
		out[name] = vals[0]
	}
	return out, nil
}

// parseLimit reads a page size: DefaultPageLimit when s is empty, else a
// whole number from 1 to MaxPageLimit.
func parseLimit(s string) (int, error) {
	if s == "" {
		return DefaultPageLimit, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxPageLimit {
		return 0, &requestError{
			Status: http.StatusBadRequest, Field: "limit",
			Msg: fmt.Sprintf("limit %q must be a whole number from 1 to %d", s, MaxPageLimit),
		}
	}
	return n, nil
}
