package wire

import (
	"bytes"
	"cmp"
	"encoding/json"
	"reflect"
	"strings"
)

// Marshal is v as compact JSON, as json.Marshal writes it but with &, < and
// > as they are. json.Marshal writes them as \u0026, \u003c and \u003e, for
// JSON put inside HTML, and a command such as sh -c 'a && b' then reads
// wrong. Marshal also undoes those three escapes where they come in JSON
// text that v holds (a json.RawMessage such as the payload of a job that a
// client stored escaped), so that the same value reads the same everywhere.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return unescapeHTML(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// unescapeHTML replaces the escapes \u0026, \u003c and \u003e (in either
// case) in the valid JSON text b with the characters they stand for.
func unescapeHTML(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u00`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		// In valid JSON a backslash begins an escape: a character of its
		// own (\\, \") or \uXXXX.
		if c, ok := htmlEscape(b[i+1:]); ok {
			out = append(out, c)
			i += 5
			continue
		}
		out = append(out, b[i], b[i+1])
		i++
	}
	return out
}

// htmlEscape reports the character of the escape that e begins after its
// backslash, when that is u0026, u003c or u003e.
func htmlEscape(e []byte) (byte, bool) {
	if len(e) < 5 || e[0] != 'u' {
		return 0, false
	}
	switch string(bytes.ToLower(e[1:5])) {
	case "0026":
		return '&', true
	case "003c":
		return '<', true
	case "003e":
		return '>', true
	}
	return 0, false
}

// FieldNames lists the JSON names of the fields of the struct v points to, in
// declaration order.
func FieldNames(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		names = append(names, cmp.Or(name, f.Name))
	}
	return names
}
