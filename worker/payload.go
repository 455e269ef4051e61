package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/sked-dev/sked/db"
)

// ValidatePayload checks the payload of a built-in kind ("exec", "http",
// "email") when a job is created, so that a bad payload is refused then
// rather than failing at every run. It returns nil for other types, whose
// payloads are their handlers' business. Its errors are *db.ValidationError
// with Field "payload" or "payload.<field>" and a message that says how to
// fix it.
func ValidatePayload(typ string, payload json.RawMessage) error {
	switch typ {
	case "exec":
		var p ExecPayload
		return parseExecPayload(payload, &p)
	case "http":
		var p HTTPPayload
		return parseHTTPPayload(payload, &p)
	case "email":
		var p EmailPayload
		return parseEmailPayload(payload, &p)
	}
	return nil
}

// decodeStrict decodes the JSON object raw into v, refusing fields other than
// allowed; example is shown to a person who sent no object at all.
func decodeStrict(raw []byte, v any, kind, example string, allowed ...string) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return &db.ValidationError{Field: "payload", Msg: fmt.Sprintf("type %s needs a payload, e.g. %s", kind, example)}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return &db.ValidationError{Field: "payload", Msg: fmt.Sprintf("must be a JSON object, e.g. %s", example)}
	}
	var unknown []string
	for k := range fields {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return &db.ValidationError{Field: "payload", Msg: fmt.Sprintf("unknown field %q; type %s takes %s", unknown[0], kind, strings.Join(allowed, ", "))}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			name, _, _ := strings.Cut(te.Field, ".")
			typ := te.Type
			if ft, ok := jsonFieldType(reflect.TypeOf(v), name); ok {
				typ = ft // the whole field, not the element that did not fit
			}
			return &db.ValidationError{Field: "payload." + name, Msg: fmt.Sprintf("must be %s, not a JSON %s", describeType(typ), te.Value)}
		}
		return &db.ValidationError{Field: "payload", Msg: err.Error()}
	}
	return nil
}

// jsonFieldType returns the type of the field of struct (or pointer to
// struct) t whose JSON name is name.
func jsonFieldType(t reflect.Type, name string) (reflect.Type, bool) {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, false
	}
	for f := range t.Fields() {
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == name {
			return f.Type, true
		}
	}
	return nil, false
}

// describeType names a Go type the way a JSON author thinks of it.
func describeType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return "an array of strings"
		}
		return "an array"
	case reflect.Map:
		if t.Elem().Kind() == reflect.String {
			return "an object with string values"
		}
		return "an object"
	case reflect.Int, reflect.Int64, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	}
	return t.String()
}
