package handlers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sked-dev/sked/clock"
	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/internal/buildinfo"
	"github.com/sked-dev/sked/web"
	"github.com/sked-dev/sked/wire"
)

// undocumented lists the route patterns the router serves that are not part
// of the API and so are not in openapi.json, each with its reason. Every
// other route must be documented, and every documented operation served.
var undocumented = map[string]string{}

// openAPI is the part of the document the tests read.
type openAPI struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"schemas"`
	} `json:"components"`
}

// openAPIMethods are the keys of a path item that are operations.
var openAPIMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func loadOpenAPI(t *testing.T) openAPI {
	t.Helper()
	var doc openAPI
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatalf("handlers/openapi.json is not valid JSON: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("handlers/openapi.json: openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	return doc
}

// TestOpenAPI_MatchesRoutes walks the real router and checks that every
// route is documented and every documented operation is a route.
func TestOpenAPI_MatchesRoutes(t *testing.T) {
	// Every optional route on: the document describes them all.
	routes, ok := New(Config{
		Store:     sqlitetest.Open(t),
		Metrics:   http.NotFoundHandler(),
		TestClock: clock.NewVirtual(testNow),
	}).Handler.(chi.Routes)
	if !ok {
		t.Fatal("handlers.New no longer returns a chi router; make this test walk the routes another way")
	}
	served := map[string]bool{} // "GET /jobs/{id}"
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if _, ok := undocumented[route]; !ok {
			served[method+" "+route] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for path, item := range loadOpenAPI(t).Paths {
		for _, m := range openAPIMethods {
			if _, ok := item[m]; ok {
				documented[strings.ToUpper(m)+" "+path] = true
			}
		}
	}
	var problems []string
	for r := range served {
		if !documented[r] {
			problems = append(problems, fmt.Sprintf("route %s is served by the router (handlers.go routes) but missing from handlers/openapi.json: document it under paths, or add its pattern to undocumented in openapi_test.go with the reason", r))
		}
	}
	for d := range documented {
		if !served[d] {
			problems = append(problems, fmt.Sprintf("handlers/openapi.json documents %s but the router serves no such route: remove it from the document or register it in routes", d))
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
	if len(served) == 0 {
		t.Fatal("the walk found no routes")
	}
}

// TestOpenAPI_SchemasMatchTypes checks that each documented schema has
// exactly the JSON fields of the Go type the API encodes or decodes.
func TestOpenAPI_SchemasMatchTypes(t *testing.T) {
	schemas := loadOpenAPI(t).Components.Schemas
	for _, tc := range []struct {
		name string
		v    any
	}{
		{"Job", db.Job{}},
		{"Run", db.Run{}},
		{"Event", db.Event{}},
		{"Change", db.Change{}},
		{"RunEvent", db.RunEvent{}},
		{"Notify", db.Notify{}},
		{"JobCreate", jobCreateRequest{}},
		{"JobCreate", wire.JobCreateRequest{}}, // the Go client sends every field
		{"JobList", jobListResponse{}},
		{"JobBatch", jobBatchRequest{}},
		{"JobBatchResult", jobBatchResponse{}},
		{"Problem", problem{}},
		{"FireTime", fireTime{}},
		{"ScheduleCheck", scheduleCheckRequest{}},
		{"ScheduleCheckResult", scheduleCheckResponse{}},
		{"ClaimRequest", wire.ClaimRequest{}},
		{"ClaimResponse", wire.ClaimResponse{}},
		{"HeartbeatRequest", wire.HeartbeatRequest{}},
		{"HeartbeatResponse", wire.HeartbeatResponse{}},
		{"CompleteRequest", wire.CompleteRequest{}},
		{"WorkerStoppedRequest", wire.WorkerStoppedRequest{}},
		{"WorkerStoppingRequest", wire.WorkerStoppingRequest{}},
		{"Stats", statsResponse{}},
		{"Series", web.Series{}},
		{"TestClockMove", testClockRequest{}},
		{"PauseRequest", pauseRequest{}},
		{"BackfillRequest", backfillRequest{}},
		{"Backfill", db.Backfill{}},
		{"Workers", wire.WorkersResponse{}},
		{"Worker", wire.Worker{}},
		{"WorkerJob", wire.WorkerJob{}},
	} {
		name, v := tc.name, tc.v
		s, ok := schemas[name]
		if !ok {
			t.Errorf("handlers/openapi.json has no components.schemas.%s for %T", name, v)
			continue
		}
		var documented []string
		for p := range s.Properties {
			documented = append(documented, p)
		}
		fields := wire.FieldNames(v)
		for _, f := range fields {
			if !slices.Contains(documented, f) {
				t.Errorf("field %q of %T is missing from components.schemas.%s.properties in handlers/openapi.json", f, v, name)
			}
		}
		for _, p := range documented {
			if !slices.Contains(fields, p) {
				t.Errorf("components.schemas.%s.properties.%s in handlers/openapi.json is not a field of %T", name, p, v)
			}
		}
	}
}

// TestOpenAPI_JobPatchIsJobCreate checks that the merge patch schema has
// the fields of a definition: those of a create request but the due time.
func TestOpenAPI_JobPatchIsJobCreate(t *testing.T) {
	var documented []string
	for p := range loadOpenAPI(t).Components.Schemas["JobPatch"].Properties {
		documented = append(documented, p)
	}
	var want []string
	for _, f := range wire.FieldNames(jobCreateRequest{}) {
		if f != "runAt" && f != "runIn" {
			want = append(want, f)
		}
	}
	slices.Sort(documented)
	slices.Sort(want)
	if !slices.Equal(documented, want) {
		t.Errorf("components.schemas.JobPatch.properties in handlers/openapi.json = %v, want %v (JobCreate's but runAt and runIn)", documented, want)
	}
}

// TestOpenAPI_RefsResolve checks that every local $ref names something in
// the document.
func TestOpenAPI_RefsResolve(t *testing.T) {
	var doc any
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	var visit func(v any, at string)
	visit = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok && resolvePointer(doc, ref) == nil {
				t.Errorf("handlers/openapi.json %s: $ref %q names nothing in the document", at, ref)
			}
			for k, c := range v {
				visit(c, at+"/"+k)
			}
		case []any:
			for i, c := range v {
				visit(c, fmt.Sprintf("%s/%d", at, i))
			}
		}
	}
	visit(doc, "#")
}

// resolvePointer follows a local JSON pointer ("#/components/schemas/Job")
// in doc; nil when it names nothing.
func resolvePointer(doc any, ref string) any {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	v := doc
	for part := range strings.SplitSeq(rest, "/") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		part = strings.NewReplacer("~1", "/", "~0", "~").Replace(part)
		if v, ok = m[part]; !ok {
			return nil
		}
	}
	return v
}

func TestOpenAPI_Served(t *testing.T) {
	e := newTestEnv(t, nil)
	res := e.do("GET", "/openapi.json", "")
	if res.status != http.StatusOK || res.header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi.json: %d %s", res.status, res.header.Get("Content-Type"))
	}
	want, err := openAPIVersioned(buildinfo.Read().Version)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.body, want) {
		t.Errorf("GET /openapi.json is not the document with info.version %q:\n%s", buildinfo.Read().Version, res.body)
	}
}

// docJSON decodes a JSON document with its numbers as written.
func docJSON(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode: %v\n%s", err, b)
	}
	return v
}

// TestOpenAPI_Version checks that the document served with a version is
// the file as written but for info.version.
func TestOpenAPI_Version(t *testing.T) {
	t.Parallel()
	got, err := openAPIVersioned("v9.8.7")
	if err != nil {
		t.Fatal(err)
	}
	want := docJSON(t, openAPIDoc)
	want.(map[string]any)["info"].(map[string]any)["version"] = "v9.8.7"
	if !reflect.DeepEqual(docJSON(t, got), want) {
		t.Errorf("openAPIVersioned changed more than info.version:\n%s", got)
	}

}

// TestOpenAPI_MaxAttempts checks that the document states the bound the
// server holds maxAttempts to, in a new job and in a patch.
func TestOpenAPI_MaxAttempts(t *testing.T) {
	var doc any
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	for _, schema := range []string{"JobCreate", "JobPatch"} {
		ref := "#/components/schemas/" + schema + "/properties/maxAttempts/maximum"
		if got := resolvePointer(doc, ref); got != float64(db.MaxAttempts) {
			t.Errorf("handlers/openapi.json %s = %v, want %d (db.MaxAttempts)", ref, got, db.MaxAttempts)
		}
	}
}

// TestOpenAPI_Name checks that the document's Name schema states the
// rules of db.CheckName a pattern can: its length, its characters, and
// no '-' first.
func TestOpenAPI_Name(t *testing.T) {
	var doc any
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	const ref = "#/components/schemas/Name"
	if got := resolvePointer(doc, ref+"/maxLength"); got != float64(db.MaxNameLen) {
		t.Errorf("handlers/openapi.json %s/maxLength = %v, want %d (db.MaxNameLen)", ref, got, db.MaxNameLen)
	}
	pattern, _ := resolvePointer(doc, ref+"/pattern").(string)
	re, err := regexp.Compile(pattern)
	if err != nil {
		t.Fatalf("handlers/openapi.json %s/pattern %q: %v", ref, pattern, err)
	}
	for _, name := range []string{"nightly-backup", "_a", ".env", "a.b_c-9", "-x", "--x", "-", "a b", "a/b", "é"} {
		if matched, valid := re.MatchString(name), db.CheckName(name) == nil; matched != valid {
			t.Errorf("handlers/openapi.json %s/pattern %q matches %q: %v; db.CheckName takes it: %v", ref, pattern, name, matched, valid)
		}
	}
}

// TestOpenAPI_BadActorEverywhere: every operation but the probes' lists
// 400, which a bad Sked-Actor header answers on every route
// (TestHandler_ActorHeader).
func TestOpenAPI_BadActorEverywhere(t *testing.T) {
	for path, item := range loadOpenAPI(t).Paths {
		if publicPaths[path] {
			continue
		}
		for method, raw := range item {
			if !slices.Contains(openAPIMethods, method) {
				continue
			}
			var op struct {
				Responses map[string]json.RawMessage `json:"responses"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			if _, ok := op.Responses["400"]; !ok {
				t.Errorf("%s %s lists no 400, which a bad Sked-Actor answers", method, path)
			}
		}
	}
}

// TestOpenAPI_WorkerRecords checks that the document states how often a
// worker's claims are recorded (db.WorkerSeenEvery) and after how long one
// is marked silent (wire.SilentAfter) as the server does, in GET /workers
// and in the Worker schema: the operation said every 15 s after the
// interval became a minute.
func TestOpenAPI_WorkerRecords(t *testing.T) {
	var doc any
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	if db.WorkerSeenEvery != time.Minute || wire.SilentAfter.String() != "2m50s" {
		t.Fatalf("db.WorkerSeenEvery %s, wire.SilentAfter %s: update handlers/openapi.json's words for them, then this test", db.WorkerSeenEvery, wire.SilentAfter)
	}
	for _, c := range []struct{ ref, want string }{
		{"#/paths/~1workers/get/description", "at most once a minute per worker"},
		{"#/paths/~1workers/get/description", "last seen over 2m50s ago"},
		{"#/components/schemas/Worker/properties/lastSeenAt/description", "at most once a minute per worker"},
		{"#/components/schemas/Worker/properties/silent/description", "over 2m50s old"},
	} {
		said, _ := resolvePointer(doc, c.ref).(string)
		if !strings.Contains(said, c.want) {
			t.Errorf("handlers/openapi.json %s = %q; want it to say %q", c.ref, said, c.want)
		}
		if regexp.MustCompile(`every \d+ ?s\b`).MatchString(said) {
			t.Errorf("handlers/openapi.json %s = %q: it gives another record interval than a minute", c.ref, said)
		}
	}
}

// TestOpenAPI_RequestBodiesRefuseUnknownFields checks that each schema a
// JSON request body refers to says additionalProperties false, as the
// server decodes every body: an unknown field answers 422. A client
// generated from the document without it (POST /jobs/batch,
// /workers/stopping, /workers/stopped) would send extra fields the server
// refuses.
func TestOpenAPI_RequestBodiesRefuseUnknownFields(t *testing.T) {
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for path, ops := range doc.Paths {
		for method, raw := range ops {
			var op struct {
				RequestBody struct {
					Content map[string]struct {
						Schema struct {
							Ref string `json:"$ref"`
						} `json:"schema"`
					} `json:"content"`
				} `json:"requestBody"`
			}
			if method == "parameters" {
				continue
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			for ct, c := range op.RequestBody.Content {
				name, ok := strings.CutPrefix(c.Schema.Ref, "#/components/schemas/")
				if !ok {
					continue
				}
				checked++
				if s := doc.Components.Schemas[name]; s["type"] == "object" && s["additionalProperties"] != false {
					t.Errorf("%s %s (%s): components.schemas.%s does not say additionalProperties false, but the server refuses unknown fields", strings.ToUpper(method), path, ct, name)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no request bodies")
	}
}
