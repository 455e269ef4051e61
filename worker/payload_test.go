package worker

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sked-dev/sked/db"
)

func TestValidatePayload(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		typ     string
		payload string
		field   string // "" when the payload is good
		msg     string // part of the message
	}{
		{"ExecMinimal", "exec", `{"command": ["true"]}`, "", ""},
		{"ExecFull", "exec", `{"command": ["/bin/echo", "hi"], "env": {"K": "V"}, "dir": "/tmp"}`, "", ""},
		{"ExecMissing", "exec", ``, "payload", "needs a payload"},
		{"ExecNull", "exec", `null`, "payload", "needs a payload"},
		{"ExecNotObject", "exec", `["ls"]`, "payload", "must be a JSON object"},
		{"ExecUnknownField", "exec", `{"command": ["ls"], "cmd": "ls"}`, "payload", `unknown field "cmd"`},
		{"ExecNoCommand", "exec", `{"env": {"K": "V"}}`, "payload.command", "must name a program"},
		{"ExecEmptyCommand", "exec", `{"command": []}`, "payload.command", "must name a program"},
		{"ExecEmptyProgram", "exec", `{"command": [""]}`, "payload.command", "must not be empty"},
		{"ExecCommandString", "exec", `{"command": "ls -l"}`, "payload.command", "must be an array of strings"},
		{"ExecEnvNotStrings", "exec", `{"command": ["ls"], "env": {"N": 1}}`, "payload.env", "object with string values"},
		{"ExecEnvBadName", "exec", `{"command": ["ls"], "env": {"A=B": "1"}}`, "payload.env", "not a valid variable name"},
		{"ExecEnvSked", "exec", `{"command": ["ls"], "env": {"SKED_JOB_ID": "x"}}`, "payload.env", "set by sked"},
		{"ExecRelativeDir", "exec", `{"command": ["ls"], "dir": "srv"}`, "payload.dir", "absolute path"},

		{"HTTPMinimal", "http", `{"url": "https://example.com/hook"}`, "", ""},
		{"HTTPFull", "http", `{"url": "http://example.com:8080/x?y=1", "method": "PUT", "headers": {"Authorization": "Bearer t", "Content-Type": "application/cloudevents+json"}, "body": [1, "two", null]}`, "", ""},
		{"HTTPBodyNull", "http", `{"url": "https://example.com", "body": null}`, "", ""},
		{"HTTPMissing", "http", ``, "payload", "needs a payload"},
		{"HTTPUnknownField", "http", `{"url": "https://example.com", "header": {}}`, "payload", `unknown field "header"`},
		{"HTTPNoURL", "http", `{"method": "POST"}`, "payload.url", "is required"},
		{"HTTPRelativeURL", "http", `{"url": "/hook"}`, "payload.url", "absolute http:// or https://"},
		{"HTTPNoHost", "http", `{"url": "http:///hook"}`, "payload.url", "absolute http:// or https://"},
		{"HTTPSchemeFTP", "http", `{"url": "ftp://example.com/f"}`, "payload.url", "absolute http:// or https://"},
		{"HTTPSchemeFile", "http", `{"url": "file:///etc/passwd"}`, "payload.url", "absolute http:// or https://"},
		{"HTTPBadURL", "http", `{"url": "http://exa mple.com/%zz"}`, "payload.url", "is not a URL"},
		{"HTTPURLNotString", "http", `{"url": 5}`, "payload.url", "must be a string"},
		{"HTTPBadMethod", "http", `{"url": "https://example.com", "method": "PO ST"}`, "payload.method", "not an HTTP method"},
		{"HTTPBadHeaderName", "http", `{"url": "https://example.com", "headers": {"X Y": "1"}}`, "payload.headers", "not a valid header name"},
		{"HTTPHeaderInjection", "http", `{"url": "https://example.com", "headers": {"X-A": "1\r\nX-B: 2"}}`, "payload.headers", "line break"},
		{"HTTPReservedSked", "http", `{"url": "https://example.com", "headers": {"sked-job-id": "x"}}`, "payload.headers", "set by sked"},
		{"HTTPReservedIdempotency", "http", `{"url": "https://example.com", "headers": {"Idempotency-Key": "x"}}`, "payload.headers", "Idempotency-Key may not be set"},
		{"HTTPReservedHost", "http", `{"url": "https://example.com", "headers": {"Host": "x"}}`, "payload.headers", "Host may not be set"},

		{"EmailMinimal", "email", `{"sink": "smtp://a@mail.example.com?to=b@example.com", "subject": "hi"}`, "", ""},
		{"EmailFull", "email", `{"sink": "smtp://a:xxxxx@mail.example.com:587?to=b@example.com", "subject": "Backup done ✓", "body": "line 1\nline 2"}`, "", ""},
		{"EmailMissing", "email", ``, "payload", "needs a payload"},
		{"EmailUnknownField", "email", `{"sink": "s", "subject": "hi", "to": "x@example.com"}`, "payload", `unknown field "to"`},
		{"EmailNoSink", "email", `{"subject": "hi"}`, "payload.sink", "is required"},
		{"EmailNoSubject", "email", `{"sink": "s", "subject": "  "}`, "payload.subject", "is required"},
		{"EmailSubjectInjection", "email", `{"sink": "s", "subject": "hi\r\nBcc: x@example.com"}`, "payload.subject", "one line"},
		{"EmailBodyNUL", "email", `{"sink": "s", "subject": "hi", "body": "a\u0000b"}`, "payload.body", "NUL"},
		{"EmailBodyNotString", "email", `{"sink": "s", "subject": "hi", "body": {"a": 1}}`, "payload.body", "must be a string"},

		{"OtherType", "resize-image", `whatever`, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := ValidatePayload(tt.typ, json.RawMessage(tt.payload))
			if tt.field == "" {
				if err != nil {
					t.Fatalf("ValidatePayload = %v, want nil", err)
				}
				return
			}
			var ve *db.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("ValidatePayload = %v, want a *db.ValidationError", err)
			}
			if !errors.Is(err, db.ErrInvalid) {
				t.Errorf("error %v does not unwrap to db.ErrInvalid", err)
			}
			if ve.Field != tt.field {
				t.Errorf("field = %q, want %q (%v)", ve.Field, tt.field, err)
			}
			if !strings.Contains(ve.Msg, tt.msg) {
				t.Errorf("message = %q, want it to contain %q", ve.Msg, tt.msg)
			}
		})
	}
}
