package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	skedapi "github.com/sked-dev/sked/client"
	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/wire"
)

// applyFlags are the flags of sked apply.
type applyFlags struct {
	file               string
	dryRun, prune, yes bool
}

func applyCmd(env Env) *cobra.Command {
	var f applyFlags
	cmd := clientCommand(env, &cobra.Command{
		Use:   "apply -f FILE [--dry-run] [--prune [--yes]]",
		Short: "Make the named jobs of a file (YAML or JSON) so: create what is new, change what differs",
		Long: "sked apply reads a list of named jobs from a YAML or JSON file (\"-\": standard input), each with the fields of\n" +
			"POST /jobs, and gives each name its definition with PUT /jobs/by-name/{name}: a new name is created, a changed\n" +
			"definition is changed in place (its runs and timeline kept), the rest is left alone. Applying the same file\n" +
			"again changes nothing. --dry-run prints the plan as a diff and changes nothing. `sked export` writes the file back.\n" +
			"When the server refuses any job of the file, apply says which and why and changes nothing.\n\n" +
			"--prune also cancels the named jobs the file does not name: every one on the server, those made by hand with\n" +
			"sked add --name too, for the server does not know which jobs a file made. So it asks for --yes when it would\n" +
			"cancel any: without it, it names them and changes nothing (exit 2). See the plan with --dry-run first.",
		Example: "  sked apply -f schedules.yaml --dry-run\n  sked apply -f schedules.yaml --prune --dry-run\n  sked apply -f schedules.yaml --prune --yes\n" +
			"  sked export > schedules.yaml",
		Args: noArgs,
	}, func(ctx context.Context, a *api, _ []string) error { return f.run(ctx, a) })
	cmd.Flags().StringVarP(&f.file, "file", "f", "", "the file of jobs, YAML or JSON; - for standard input")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "print what would change, as a diff, and change nothing")
	cmd.Flags().BoolVar(&f.prune, "prune", false, "cancel the named jobs that the file does not name, those made by hand too (asks for --yes)")
	cmd.Flags().BoolVar(&f.yes, "yes", false, "with --prune: cancel the jobs it names; without --yes it cancels none and changes nothing")
	return cmd
}

// source is how messages name the file: "-" is "standard input".
func (f *applyFlags) source() string {
	if f.file == "-" {
		return "standard input"
	}
	return f.file
}

// run applies the file.
func (f *applyFlags) run(ctx context.Context, a *api) error {
	switch {
	case f.file == "":
		return usagef("-f FILE is required: the jobs to apply, YAML or JSON (- for standard input)")
	case f.yes && !f.prune:
		return usagef("--yes confirms the cancellations of --prune; add --prune, or leave out --yes")
	}
	b, err := readFile(f.file)
	if err != nil {
		return err
	}
	jobs, err := parseJobs(b)
	if err != nil {
		return usagef("%s: %v", f.source(), err)
	}
	var prune []db.Job
	if f.prune {
		if prune, err = unnamedIn(ctx, a, jobs); err != nil {
			return err
		}
		if len(prune) > 0 && !f.dryRun && !f.yes {
			var names []string
			for _, j := range prune[:min(len(prune), pruneNamesShown)] {
				names = append(names, j.Name)
			}
			if more := len(prune) - len(names); more > 0 {
				names = append(names, fmt.Sprintf("and %d more", more))
			}
			return usagef("--prune would cancel %s that %s does not name: %s. It cancels every named job not in the file, "+
				"those made by hand with sked add --name too; nothing was changed. See the plan with --dry-run, then add --yes to cancel them",
				plural(len(prune), "named job"), f.source(), strings.Join(names, ", "))
		}
	}
	if !f.dryRun {
		if err := f.check(ctx, a, jobs); err != nil {
			return err
		}
	}
	var (
		created, changed, unchanged, refused, pruned int
		errs                                         []error
		results                                      []db.JobPutResult
	)
	for _, req := range jobs {
		res, err := a.c.JobPut(ctx, req.Name, req, f.dryRun)
		if r := refusal(a, req.Name, err); r != nil {
			refused++
			errs = append(errs, r)
			continue
		}
		if err != nil {
			// Not this job's fault (no server, a refused token): the
			// jobs after it would fail alike.
			if created+changed+unchanged+refused == 0 {
				return a.apiError(err)
			}
			errs = append(errs, fmt.Errorf("job %s: %w", req.Name, a.apiError(err)))
			break
		}
		results = append(results, res)
		switch {
		case res.Created:
			created++
			if !a.json {
				printCreate(a.env.Stdout, req, f.dryRun)
			}
			undo := "sked cancel " + req.Name
			if f.dryRun {
				undo = "mend its runAt in " + f.source()
			}
			warnPassed(a.env.Stderr, "the runAt of "+req.Name, req.RunAt, res.Job, undo)
		case len(res.Changes) > 0:
			changed++
			if !a.json {
				printChanges(a.env.Stdout, "~ "+jobLabel(res.Job), res.Changes)
			}
		default:
			unchanged++
		}
		if !a.json && !res.Created {
			noteOneOff(a.env.Stdout, req, res.Job)
		}
	}
	if f.prune {
		var perrs []error
		pruned, perrs = f.pruneJobs(ctx, a, prune)
		errs = append(errs, perrs...)
	}
	if a.json {
		if err := a.printJSON(results); err != nil {
			return err
		}
		return errors.Join(errs...)
	}
	would := ""
	if f.dryRun {
		would = "would be "
	}
	switch {
	case created+changed+pruned == 0 && len(errs) == 0:
		fmt.Fprintf(a.env.Stdout, "nothing to change: the server has the %s of %s as they are\n", plural(len(jobs), "job"), f.source())
	default:
		fmt.Fprintf(a.env.Stdout, "%s: %d %screated, %d %schanged, %d unchanged", plural(len(jobs), "job"), created, would, changed, would, unchanged)
		if refused > 0 {
			fmt.Fprintf(a.env.Stdout, ", %d refused (below)", refused)
		}
		if untried := len(jobs) - created - changed - unchanged - refused; untried > 0 {
			fmt.Fprintf(a.env.Stdout, ", %d not tried", untried)
		}
		if f.prune {
			fmt.Fprintf(a.env.Stdout, ", %d %scancelled (not in %s)", pruned, would, f.source())
			if notPruned := len(prune) - pruned; notPruned > 0 {
				fmt.Fprintf(a.env.Stdout, ", %d not cancelled (below)", notPruned)
			}
		}
		fmt.Fprintln(a.env.Stdout)
	}
	if f.dryRun && len(errs) == 0 {
		fmt.Fprintln(a.env.Stdout, "(dry run: nothing was changed)")
		if len(prune) > 0 && !f.yes {
			fmt.Fprintln(a.env.Stdout, "(--prune cancels only with --yes)")
		}
	}
	return errors.Join(errs...)
}

// pruneNamesShown is how many of the jobs --prune would cancel its
// refusal names; the plan (--dry-run) lists them all.
const pruneNamesShown = 10

// noteOneOff says what a put of req left as it was of job, a one-off job the
// file names, that the file may mean to change: a due time other than the
// file's (a put keeps it), or a run that is over (a put does not run it
// again).
func noteOneOff(w io.Writer, req skedapi.JobCreateRequest, job db.Job) {
	switch {
	case job.Recurring():
	case job.State == db.StateDone:
		fmt.Fprintf(w, "= %s is done: apply does not run a one-off job again; to run it anew, rename that one (`sked edit %s --name %s-old`) and apply again\n",
			job.Name, job.ID, job.Name)
	case job.State == db.StateDead:
		fmt.Fprintf(w, "= %s is dead: apply does not run a one-off job again; `sked retry %s` does\n", job.Name, job.Name)
	case (job.State == db.StateReady || job.State == db.StatePaused) && job.Attempt == 0 &&
		req.RunAt != nil && job.Slot != nil && !req.RunAt.Equal(*job.Slot):
		// The slot of a one-off job is its runAt (its due time may be
		// later: a jitter's offset).
		fmt.Fprintf(w, "= %s keeps its time %s, not the file's runAt %s: a put does not move a one-off job; cancel it (`sked cancel %s`) and apply again to move it\n",
			job.Name, timeText(job.Slot), optTime(req.RunAt), job.Name)
	}
}

// check asks the server, as a dry run, whether it takes every job of the
// file; when it refuses any, it says which and why and that nothing was
// changed, so that a file with a mistake is applied whole once mended, not
// half now. A job can still be refused after the check (someone changed
// the server meanwhile); apply then reports it as it goes.
func (f *applyFlags) check(ctx context.Context, a *api, jobs []skedapi.JobCreateRequest) error {
	var errs []error
	for _, req := range jobs {
		_, err := a.c.JobPut(ctx, req.Name, req, true)
		if r := refusal(a, req.Name, err); r != nil {
			errs = append(errs, r)
			continue
		}
		if err != nil {
			return a.apiError(err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	if !a.json {
		fmt.Fprintf(a.env.Stdout, "%s: %d refused (below); nothing was changed: mend %s and apply it again\n",
			plural(len(jobs), "job"), len(errs), f.source())
	}
	return errors.Join(errs...)
}

// refusal is err, the answer to a PUT of the job name, as told when the
// server refused the job itself (422, 409); nil for any other answer.
func refusal(a *api, name string, err error) error {
	if ae := (*skedapi.Error)(nil); errors.As(err, &ae) && (ae.Status == http.StatusUnprocessableEntity || ae.Status == http.StatusConflict) {
		return fmt.Errorf("job %s: %w%s", name, a.apiError(err), yamlHint(ae))
	}
	return nil
}

// plural is "1 job", "2 jobs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// unnamedIn are the named jobs, neither cancelled nor done, that jobs does
// not name: those --prune cancels.
func unnamedIn(ctx context.Context, a *api, jobs []skedapi.JobCreateRequest) ([]db.Job, error) {
	keep := map[string]bool{}
	for _, j := range jobs {
		keep[j.Name] = true
	}
	named, _, err := namedJobs(ctx, a.c)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(named, func(j db.Job) bool { return keep[j.Name] }), nil
}

// pruneJobs cancels the jobs of prune (see unnamedIn) and returns how many
// it cancelled (or would). A job whose run is going cannot be cancelled (409): the plan says so,
// and a cancel refused is said with how to finish the prune.
func (f *applyFlags) pruneJobs(ctx context.Context, a *api, prune []db.Job) (int, []error) {
	n := 0
	var errs []error
	for _, j := range prune {
		if !f.dryRun {
			if err := a.c.JobCancel(ctx, j.ID); err != nil {
				hint := ""
				if skedapi.IsStatus(err, http.StatusConflict) {
					hint = fmt.Sprintf("; to finish the prune, apply again once its run has ended (`sked pause %s` first keeps the schedule from starting another)", j.Name)
				}
				errs = append(errs, fmt.Errorf("prune job %s: %w%s", j.Name, a.apiError(err), hint))
				continue
			}
		}
		n++
		if !a.json {
			running := ""
			if f.dryRun && j.State == db.StateRunning {
				running = "; running now: its cancel is refused until the run ends"
			}
			fmt.Fprintf(a.env.Stdout, "- %s: cancel (%s job, not in %s%s)\n", jobLabel(j), j.Type, f.source(), running)
		}
	}
	return n, errs
}

// namedJobs are the jobs that have a name and are neither cancelled nor
// done, by name: a done one-off job is no longer a definition to keep (and
// applied to another server it would run again). unnamed counts the jobs
// neither cancelled nor done that have no name.
func namedJobs(ctx context.Context, c *skedapi.Client) (named []db.Job, unnamed int, err error) {
	p := db.JobListParams{Limit: 500}
	all, _, err := pages("", true, func(cursor string) ([]db.Job, string, error) {
		p.Cursor = cursor
		return c.JobList(ctx, p)
	})
	if err != nil {
		return nil, 0, err
	}
	live := slices.DeleteFunc(all, func(j db.Job) bool { return j.State == db.StateCancelled || j.State == db.StateDone })
	named = slices.DeleteFunc(live, func(j db.Job) bool { return j.Name == "" })
	slices.SortFunc(named, func(a, b db.Job) int { return strings.Compare(a.Name, b.Name) })
	return named, len(live) - len(named), nil
}

// printCreate prints a job to be created as the lines of a diff.
func printCreate(w io.Writer, req skedapi.JobCreateRequest, dryRun bool) {
	fmt.Fprintf(w, "+ %s: create\n", req.Name)
	if !dryRun {
		return
	}
	fields, err := orderedFields(req)
	if err != nil {
		fmt.Fprintf(w, "    (its fields cannot be shown: %v)\n", err)
	}
	for _, kv := range fields {
		if kv.key != "name" {
			fmt.Fprintf(w, "    + %s: %s\n", kv.key, kv.value)
		}
	}
}

// printChanges prints changes, by field name, as the lines of a diff under
// the header.
func printChanges(w io.Writer, header string, changes db.Changes) {
	fmt.Fprintln(w, header)
	for _, field := range slices.Sorted(maps.Keys(changes)) {
		c := changes[field]
		fmt.Fprintf(w, "    - %s: %s\n    + %s: %s\n", field, jsonText(c.From), field, jsonText(c.To))
	}
}

// jsonText is v as compact JSON, "null" for none, with &, < and > as they
// are (wire.Marshal).
func jsonText(v any) string {
	b, err := wire.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// readFile reads name, or standard input for "-".
func readFile(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, usagef("-f: %v", err)
	}
	return b, nil
}

// parseJobs reads a list of named job definitions, YAML or JSON, with the
// fields of POST /jobs; a field it does not know is an error (a typo would
// otherwise be a default).
func parseJobs(b []byte) ([]skedapi.JobCreateRequest, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	if doc.Kind == 0 {
		return nil, errors.New("holds no jobs: give a list of jobs, each with a name")
	}
	list := doc.Content[0]
	if list.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("line %d: give a list of jobs, each with a name (\"- name: nightly-backup\")", list.Line)
	}
	seen, keys := map[string]int{}, map[string]int{}
	jobs := make([]skedapi.JobCreateRequest, len(list.Content))
	for i, n := range list.Content {
		if line, err := decodeJob(n, &jobs[i]); err != nil {
			return nil, fmt.Errorf("line %d (job %d): %w", line, i+1, err)
		}
		name, key := jobs[i].Name, jobs[i].IdempotencyKey
		switch {
		case name == "":
			return nil, fmt.Errorf("job %d (line %d) has no name: every job of the file needs one", i+1, n.Line)
		case seen[name] > 0:
			return nil, fmt.Errorf("job %d (line %d): the name %q is given twice (first on line %d)", i+1, n.Line, name, seen[name])
		case key != "" && keys[key] > 0:
			// The server would take the first and refuse the second,
			// after the check that each alone passes.
			return nil, fmt.Errorf("job %d (line %d): the idempotencyKey %q is given twice (first on line %d); give each job its own, or none",
				i+1, n.Line, key, keys[key])
		}
		seen[name] = n.Line
		if key != "" {
			keys[key] = n.Line
		}
	}
	return jobs, nil
}

// decodeJob reads the job n, a YAML mapping, into req one field at a time,
// so that a mistake is told with its field and the line of the field, in
// the words of the file rather than of Go's JSON decoder.
func decodeJob(n *yaml.Node, req *skedapi.JobCreateRequest) (line int, err error) {
	if n.Kind != yaml.MappingNode {
		return n.Line, errors.New(`a job is a mapping of its fields ("name: …", "type: …")`)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key := n.Content[i]
		var buf bytes.Buffer
		if err := writeJSON(&buf, &yaml.Node{Kind: yaml.MappingNode, Content: n.Content[i : i+2]}); err != nil {
			return key.Line, err
		}
		dec := json.NewDecoder(&buf)
		dec.DisallowUnknownFields()
		if err := dec.Decode(req); err != nil {
			return key.Line, errors.New(fieldMistake(key.Value, err))
		}
	}
	return n.Line, nil
}

// fieldMistake says what is wrong with the field name of a job, which
// json.Decoder refused with err.
func fieldMistake(name string, err error) string {
	var (
		typeErr *json.UnmarshalTypeError
		timeErr *time.ParseError
	)
	switch {
	case errors.As(err, &timeErr):
		return fmt.Sprintf("%s %q is not an RFC 3339 time such as 2026-12-01T06:00:00Z", name, timeErr.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Sprintf("unknown field %q; a job's fields are %s", name, strings.Join(wire.FieldNames(skedapi.JobCreateRequest{}), ", "))
	case errors.As(err, &typeErr):
		want := map[reflect.Kind]string{reflect.Int: "a whole number", reflect.String: "text", reflect.Struct: "a mapping"}[typeErr.Type.Kind()]
		got := map[string]string{"string": "text", "number": "a number", "bool": "true or false", "array": "a list", "object": "a mapping"}[typeErr.Value]
		if want != "" && got != "" {
			return fmt.Sprintf("%s must be %s, not %s", name, want, got)
		}
	}
	return fmt.Sprintf("%s: %s", name, strings.TrimPrefix(err.Error(), "json: "))
}

// yamlHint is a hint for a refusal of a value of the wrong kind where text
// was wanted: in YAML, true, false and numbers written without quotes are
// not text ("command: [true]" is a boolean), the common mistake behind it.
func yamlHint(e *skedapi.Error) string {
	if strings.Contains(e.Detail, "not a JSON bool") || strings.Contains(e.Detail, "not a JSON number") {
		return `; in YAML, quote a value meant as text ("true", "0755"): unquoted, true, false and numbers are not text`
	}
	return ""
}

// writeJSON writes the YAML node n as JSON, keeping the order of mapping
// keys (a payload applied as exported is the same JSON) and numbers as
// written.
func writeJSON(w *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.AliasNode:
		return writeJSON(w, n.Alias)
	case yaml.MappingNode:
		w.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				w.WriteByte(',')
			}
			k, _ := wire.Marshal(n.Content[i].Value)
			w.Write(k)
			w.WriteByte(':')
			if err := writeJSON(w, n.Content[i+1]); err != nil {
				return err
			}
		}
		w.WriteByte('}')
	case yaml.SequenceNode:
		w.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				w.WriteByte(',')
			}
			if err := writeJSON(w, c); err != nil {
				return err
			}
		}
		w.WriteByte(']')
	default:
		if (n.Tag == "!!int" || n.Tag == "!!float") && json.Valid([]byte(n.Value)) {
			w.WriteString(n.Value)
			return nil
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		b, err := wire.Marshal(v)
		if err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		w.Write(b)
	}
	return nil
}

// field is one member of a JSON object.
type field struct{ key, value string }

// orderedFields is v's JSON members in order, each value compact JSON.
func orderedFields(v any) ([]field, error) {
	b, err := wire.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	var out []field
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		out = append(out, field{k.(string), string(raw)})
	}
	return out, nil
}

func exportCmd(env Env) *cobra.Command {
	cmd := clientCommand(env, &cobra.Command{
		Use:   "export",
		Short: "Write the named jobs as a file sked apply takes (YAML; JSON with --json)",
		Long: "sked export writes the named jobs that are neither cancelled nor done, by name, with their whole definitions\n" +
			"(defaults filled in) and a one-off job's due time (runAt), as the YAML list sked apply reads (--json: JSON).\n" +
			"Applying it back changes nothing. The file holds no state: on standard error it names the jobs that are\n" +
			"paused, dead or running (one-off) here, which applied to another server are not paused, run again, and counts the\n" +
			"jobs without a name, which it leaves out.",
		Example: "  sked export > schedules.yaml\n  sked export | sked apply -f - --dry-run",
		Args:    noArgs,
	}, func(ctx context.Context, a *api, _ []string) error {
		named, unnamed, err := namedJobs(ctx, a.c)
		if err != nil {
			return err
		}
		reqs := make([]skedapi.JobCreateRequest, len(named))
		for i, j := range named {
			reqs[i] = exportRequest(j)
		}
		if a.json {
			err = a.printJSON(reqs)
		} else {
			err = writeYAML(a.env.Stdout, reqs)
		}
		if err != nil {
			return err
		}
		printNotCarried(a.env.Stderr, named, unnamed)
		return nil
	})
	cmd.Flags().Lookup("json").Usage = "print JSON instead of YAML"
	return cmd
}

// exportRequest is the definition of j as sked export writes it: with a
// one-off job's due time, so that applied to another server it runs when
// it would have run here (applied to this server, the due time changes
// nothing: it is not part of the definition).
func exportRequest(j db.Job) skedapi.JobCreateRequest {
	req := skedapi.RequestOf(j)
	if j.Schedule == "" {
		req.RunAt = cmp.Or(j.NextRunAt, j.Slot)
	}
	return req
}

// printNotCarried tells w what an export of named, with unnamed jobs left
// out, does not carry to another server: a file holds definitions, not
// whether a job is paused, dead (one-off) or running (a one-off job runs
// again; a recurring one runs from its next slot), and only the named jobs.
func printNotCarried(w io.Writer, named []db.Job, unnamed int) {
	var lines []string
	for _, j := range named {
		switch j.State {
		case db.StatePaused:
			lines = append(lines, fmt.Sprintf("%s is paused here; applied elsewhere it is not: pause it there too", j.Name))
		case db.StateDead:
			lines = append(lines, fmt.Sprintf("%s is dead here; applied elsewhere it is ready and runs again", j.Name))
		case db.StateRunning:
			if j.Schedule != "" {
				continue // there it runs from its next slot
			}
			lines = append(lines, fmt.Sprintf("%s is running here; applied elsewhere it runs again", j.Name))
		}
	}
	switch {
	case unnamed == 1:
		lines = append(lines, "1 job without a name is left out (sked ls lists it)")
	case unnamed > 1:
		lines = append(lines, fmt.Sprintf("%d jobs without a name are left out (sked ls lists them)", unnamed))
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "sked export: the file holds the named jobs' definitions, not their state:")
	for _, l := range lines {
		fmt.Fprintln(w, "  "+l)
	}
}

// writeYAML writes v, a value that marshals to JSON, as block-style YAML
// with the JSON's order of keys.
func writeYAML(w io.Writer, v any) error {
	b, err := wire.Marshal(v)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("write YAML: %w", err)
	}
	blockStyle(&doc)
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("write YAML: %w", err)
	}
	return enc.Close()
}

// blockStyle turns the flow style of JSON text parsed as YAML into block
// style, and its quoted strings into plain ones where YAML allows.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}
