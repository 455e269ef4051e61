package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	skedapi "github.com/sked-dev/sked/client"
	"github.com/sked-dev/sked/db"
)

// editFields are the flags of sked edit and the fields of the merge patch
// they set.
var editFields = []struct{ flag, field string }{
	{"name", "name"}, {"schedule", "schedule"}, {"tz", "timezone"}, {"payload", "payload"},
	{"max-attempts", "maxAttempts"}, {"timeout", "timeout"}, {"backoff", "backoff"}, {"jitter", "jitter"},
	{"overlap", "overlap"}, {"misfire", "misfire"}, {"expect-success-within", "expectSuccessWithin"},
}

// editFieldNames lists the fields of editFields, comma-separated.
func editFieldNames() string {
	names := make([]string, len(editFields))
	for i, ef := range editFields {
		names[i] = ef.field
	}
	return strings.Join(names, ", ")
}

func editCmd(env Env) *cobra.Command {
	var (
		unset []string
		file  string
		fs    *pflag.FlagSet
	)
	cmd := jobCommand(env, "edit ID|NAME [--schedule CRON] [--payload JSON|@FILE] [flags]",
		"Change a job's definition (a merge patch of the flags given, or in $EDITOR)",
		func(ctx context.Context, a *api, id string) error { return edit(ctx, a, id, fs, unset, file) })
	fs = cmd.Flags()
	cmd.Long = "sked edit changes a job in place with PATCH /jobs/{id}: the flags given set their fields, --unset FIELD sets one\n" +
		"back to its default. Without flags it opens the job's definition as YAML in $VISUAL or $EDITOR and sends what you\n" +
		"changed; -f FILE sends the definition in FILE instead. An edit the server refuses is kept in its file, whose path\n" +
		"is printed: fix it and send it with -f. A running run finishes under the old definition; the next slot follows\n" +
		"the new schedule; the change is recorded on the job's timeline (sked show)."
	cmd.Example = "  sked edit nightly-backup --schedule '0 4 * * *' --tz Europe/Berlin\n  sked edit nightly-backup --unset jitter\n" +
		"  sked edit nightly-backup\n  sked edit nightly-backup -f nightly-backup.yaml"
	fs.String("name", "", "the job's new name")
	fs.String("schedule", "", helpSchedule)
	fs.String("tz", "", helpTZ)
	fs.String("payload", "", helpPayload)
	fs.Int("max-attempts", 0, helpMaxAttempts)
	fs.Duration("timeout", 0, helpTimeout)
	fs.Duration("backoff", 0, helpBackoff)
	fs.Duration("jitter", 0, helpJitter)
	fs.String("overlap", "", helpOverlap)
	fs.String("misfire", "", helpMisfire)
	fs.Duration("expect-success-within", 0, helpExpect)
	fs.StringArrayVar(&unset, "unset", nil, "set this field back to its default, e.g. jitter or expectSuccessWithin; repeat for several")
	fs.StringVarP(&file, "file", "f", "", "send the definition in this file (YAML or JSON, as the editor shows it; - for standard input): "+
		"the fields that differ from the job's are set, those it lacks go back to their defaults")
	fs.SortFlags = false
	return cmd
}

// zeroEdit refuses a zero given to flag (--timeout, --backoff,
// --max-attempts), which the server refuses for field, saying how to get
// the field's default. (A zero jitter or expect-success-within is none,
// and is taken.)
func zeroEdit(flag, field, value string) error {
	return usagef("--%s %s: give a value above zero, or --unset %s for the default", flag, value, field)
}

// edit changes job id by the flags of fs given and unset, by the
// definition in file, or in an editor when none was given.
func edit(ctx context.Context, a *api, id string, fs *pflag.FlagSet, unset []string, file string) error {
	patch := map[string]any{}
	for _, ef := range editFields {
		if !fs.Changed(ef.flag) {
			continue
		}
		v := fs.Lookup(ef.flag).Value
		switch {
		case ef.flag == "payload":
			p, err := readPayload(v.String())
			if err != nil {
				return err
			}
			patch[ef.field] = p
		case v.Type() == "duration":
			d, _ := fs.GetDuration(ef.flag)
			if d == 0 && (ef.flag == "timeout" || ef.flag == "backoff") {
				return zeroEdit(ef.flag, ef.field, v.String())
			}
			patch[ef.field] = db.Duration(d)
		case v.Type() == "int":
			n, _ := fs.GetInt(ef.flag)
			if n == 0 {
				return zeroEdit(ef.flag, ef.field, v.String())
			}
			patch[ef.field] = n
		case v.String() == "":
			// A script's unset variable, as sked add refuses it: it
			// would silently drop the name or reset the zone.
			return usagef("--%s is empty: give a value, or --unset %s to set the field back to its default", ef.flag, ef.field)
		default:
			patch[ef.field] = v.String()
		}
	}
	for _, u := range unset {
		if !slices.ContainsFunc(editFields, func(ef struct{ flag, field string }) bool { return ef.field == u }) {
			return usagef("--unset %s: not a field sked edit changes; give one of %s", u, editFieldNames())
		}
		if _, ok := patch[u]; ok {
			return usagef("--unset %s: the field is also set by a flag", u)
		}
		patch[u] = nil
	}
	if file != "" && len(patch) > 0 {
		return usagef("-f %s sends a whole definition; leave out the flags that set fields, or -f", file)
	}
	before, err := a.c.JobGet(ctx, id)
	if err != nil {
		return err
	}
	kept := "" // the file of an edit made in the editor, kept when it is not applied
	switch {
	case file != "":
		b, err := readFile(file)
		if err != nil {
			return err
		}
		if patch, err = definitionPatch(b, before); err != nil {
			return err
		}
	case len(patch) == 0: // no flag of sked edit's own: the editor says what changes
		if kept, patch, err = editInEditor(before, a.env); err != nil {
			return err
		}
		defer func() {
			if kept != "" {
				os.RemoveAll(filepath.Dir(kept))
			}
		}()
	}
	if len(patch) == 0 {
		fmt.Fprintf(a.env.Stdout, "no change to job %s\n", jobLabel(before))
		return nil
	}
	after, err := a.c.JobPatch(ctx, before.ID, patch)
	if err != nil {
		return keepEdit(&kept, before, a.apiError(err))
	}
	if a.json {
		return a.printJSON(after)
	}
	changes := db.Diff(db.SpecOf(before), db.SpecOf(after))
	if len(changes) == 0 {
		fmt.Fprintf(a.env.Stdout, "no change to job %s: it is so already\n", jobLabel(after))
		return nil
	}
	printChanges(a.env.Stdout, "changed job "+jobLabel(after)+":", changes)
	switch {
	case after.State == db.StatePaused:
		fmt.Fprintf(a.env.Stdout, "paused %s\n", pausedUntil(after))
	case nextRun(after) != nil:
		fmt.Fprintf(a.env.Stdout, "next run %s\n", zonedText(nextRun(after), after.Timezone))
	}
	return nil
}

// keepEdit keeps the file of an edit made in the editor that err stopped
// (*kept, which it clears so that it is not removed) and adds to err where
// it is and how to send it again. Without such a file it returns err.
func keepEdit(kept *string, job db.Job, err error) error {
	if *kept == "" {
		return err
	}
	path := *kept
	*kept = ""
	return errors.Join(err, fmt.Errorf("your edit is kept in %s: fix it there and send it with `sked edit %s -f %s`", path, cmp.Or(job.Name, job.ID), path))
}

// editInEditor opens job's definition as YAML in the user's editor and
// returns the file it was edited in and the merge patch of what was
// changed (see definitionPatch). The file is left in a directory of its
// own for the caller to remove; when its text cannot be read as a
// definition it is kept (see keepEdit).
func editInEditor(job db.Job, env Env) (path string, patch map[string]any, err error) {
	if env.Getenv("VISUAL") == "" && env.Getenv("EDITOR") == "" && !isTerminal(os.Stdin) {
		name := cmp.Or(job.Name, job.ID)
		return "", nil, usagef("sked edit %s without flags opens the job in vi, which needs a terminal, and standard input is not one; "+
			"give the changes as flags (sked edit %s --schedule '0 4 * * *'), a definition with -f FILE, or an editor that needs no terminal in $EDITOR", name, name)
	}
	def := skedapi.RequestOf(job)
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# The definition of job %s. Change it, save and quit; remove a field to set it back\n"+
		"# to its default; leave it as it is to change nothing.\n", jobLabel(job))
	if err := writeYAML(&buf, def); err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "sked-edit")
	if err != nil {
		return "", nil, fmt.Errorf("edit: %w", err)
	}
	handedOver := false // the file goes to the caller, or is kept for the user
	defer func() {
		if !handedOver {
			os.RemoveAll(dir)
		}
	}()
	path = filepath.Join(dir, cmp.Or(job.Name, job.ID)+".yaml")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		return "", nil, fmt.Errorf("edit: %w", err)
	}
	editor := cmp.Or(env.Getenv("VISUAL"), env.Getenv("EDITOR"), "vi")
	cmd := exec.Command("sh", "-c", editor+` "$1"`, "sh", path)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil { // the editor failed or was quit without saving (:cq)
		return "", nil, fmt.Errorf("edit with %s: %w", editor, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("edit: %w", err)
	}
	handedOver = true
	if patch, err = definitionPatch(b, job); err != nil {
		return "", nil, keepEdit(&path, job, err)
	}
	return path, patch, nil
}

// definitionPatch reads b, a job definition as YAML (or JSON), and returns
// the merge patch that makes job so: the fields that differ set, those b
// lacks null (back to their defaults).
func definitionPatch(b []byte, job db.Job) (map[string]any, error) {
	old, err := orderedFields(skedapi.RequestOf(job))
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, usagef("the edited definition: %v", err)
	}
	if doc.Kind == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, usagef("the edited definition is not a mapping of fields; nothing changed")
	}
	var j bytes.Buffer
	if err := writeJSON(&j, doc.Content[0]); err != nil {
		return nil, usagef("the edited definition: %v", err)
	}
	var edited map[string]json.RawMessage
	if err := json.Unmarshal(j.Bytes(), &edited); err != nil {
		return nil, usagef("the edited definition: %v", err)
	}
	patch := map[string]any{}
	for _, f := range old {
		v, ok := edited[f.key]
		switch {
		case !ok && f.key == "type":
			return nil, usagef("the edited definition has no type: a job's type cannot change; keep the line `type: %s`", job.Type)
		case !ok:
			patch[f.key] = nil
		case !db.SameJSON(v, []byte(f.value)):
			patch[f.key] = v
		}
		delete(edited, f.key)
	}
	for k, v := range edited {
		patch[k] = v
	}
	return patch, nil
}
