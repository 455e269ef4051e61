package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"

	skedapi "github.com/sked-dev/sked/client"
	"github.com/sked-dev/sked/wire"
)

// jsonError is an error as a command given --json prints it on stdout,
// {"error": …}, when it failed before printing anything else: the fields
// of the server's problem (RFC 9457) when the server answered with one,
// what sked says of it, and the exit status, so that a script reading
// stdout learns what went wrong without parsing stderr.
type jsonError struct {
	// Type, Title and Status are the server's problem's, when it answered
	// with one; absent for an error without an answer (no server, a
	// command line sked refused, a wait that ran out).
	Type   string `json:"type,omitempty"`
	Title  string `json:"title,omitempty"`
	Status int    `json:"status,omitempty"`
	// Detail is the server's detail, or else what went wrong.
	Detail string `json:"detail"`
	// Field is the bad input the server named, as the API names it.
	Field string `json:"field,omitempty"`
	// Message is what sked prints on stderr: Detail with what to do.
	Message string `json:"message"`
	// ExitCode is the process's exit status (ExitCode).
	ExitCode int `json:"exitCode"`
	// Extensions are the other members of the server's problem (such as
	// state and run on a 409 about a job), written after the fields above
	// as the server sent them; a member named as one of those is left out.
	Extensions map[string]json.RawMessage `json:"-"`
}

// MarshalJSON writes e's fields, then its extensions in the order of their
// names.
func (e jsonError) MarshalJSON() ([]byte, error) {
	type fields jsonError // without this method
	b, err := wire.Marshal(fields(e))
	if err != nil {
		return nil, err
	}
	var own map[string]json.RawMessage
	if err := json.Unmarshal(b, &own); err != nil {
		return nil, err
	}
	out := bytes.NewBuffer(bytes.TrimSuffix(b, []byte("}")))
	for _, name := range slices.Sorted(maps.Keys(e.Extensions)) {
		if _, taken := own[name]; taken {
			continue
		}
		k, err := wire.Marshal(name)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(out, ",%s:%s", k, e.Extensions[name])
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}

// errorDocument is err as a command given --json prints it.
func errorDocument(err error) map[string]jsonError {
	msg := strings.TrimRight(err.Error(), "\n")
	e := jsonError{Detail: msg, Message: msg, ExitCode: ExitCode(err)}
	if ae := (*skedapi.Error)(nil); errors.As(err, &ae) {
		e.Type, e.Title, e.Status, e.Field = "about:blank", http.StatusText(ae.Status), ae.Status, ae.Field
		e.Extensions = ae.Extensions
		if ae.Detail != "" {
			e.Detail = ae.Detail
		}
	}
	return map[string]jsonError{"error": e}
}

// printIndented writes v to w as indented JSON, with &, < and > as they are
// (wire.Marshal).
func printIndented(w io.Writer, v any) error {
	b, err := wire.Marshal(v)
	if err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}
