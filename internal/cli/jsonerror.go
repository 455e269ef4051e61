package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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
}

// errorDocument is err as a command given --json prints it.
func errorDocument(err error) map[string]jsonError {
	msg := strings.TrimRight(err.Error(), "\n")
	e := jsonError{Detail: msg, Message: msg, ExitCode: ExitCode(err)}
	if ae := (*skedapi.Error)(nil); errors.As(err, &ae) {
		e.Type, e.Title, e.Status, e.Field = "about:blank", http.StatusText(ae.Status), ae.Status, ae.Field
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
