package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
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
		fs    *pflag.FlagSet
	)
	cmd := jobCommand(env, "edit ID|NAME [--schedule CRON] [--payload JSON|@FILE] [flags]",
		"Change a job's definition (a merge patch of the flags given, or in $EDITOR)",
		func(ctx context.Context, a *api, id string) error { return edit(ctx, a, id, fs, unset) })
	fs = cmd.Flags()
	cmd.Long = "sked edit changes a job in place with PATCH /jobs/{id}: the flags given set their fields, --unset FIELD sets one\n" +
		"back to its default. Without flags it opens the job's definition as YAML in $VISUAL or $EDITOR and sends what you\n" +
		"changed. A running run finishes under the old definition; the next slot follows the new schedule; the change is\n" +
		"recorded on the job's timeline (sked show)."
	cmd.Example = "  sked edit nightly-backup --schedule '0 4 * * *' --tz Europe/Berlin\n  sked edit nightly-backup --unset jitter\n  sked edit nightly-backup"
	fs.String("name", "", "the job's new name")
	fs.String("schedule", "", "cron expression, e.g. '30 2 * * 1-5' or '@every 90s'")
	fs.String("tz", "", "IANA time zone of the schedule")
	fs.String("payload", "", "payload JSON, or @FILE to read it from a file")
	fs.Int("max-attempts", 0, "attempts before a firing gives up")
	fs.Duration("timeout", 0, "limit of one attempt")
	fs.Duration("backoff", 0, "first retry delay, doubled per attempt")
	fs.Duration("jitter", 0, "spread the slots by a fixed offset inside this window")
	fs.String("overlap", "", "skip or queue_one")
	fs.String("misfire", "", "run_once, skip or run_all")
	fs.Duration("expect-success-within", 0, "mark the job quiet when no run succeeded for this long")
	fs.StringArrayVar(&unset, "unset", nil, "set this field back to its default, e.g. jitter or expectSuccessWithin; repeat for several")
	fs.SortFlags = false
	return cmd
}

// edit changes job id by the flags of fs given and unset, or in an editor
// when none was given.
func edit(ctx context.Context, a *api, id string, fs *pflag.FlagSet, unset []string) error {
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
			patch[ef.field] = db.Duration(d)
		case v.Type() == "int":
			n, _ := fs.GetInt(ef.flag)
			patch[ef.field] = n
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
	before, err := a.c.JobGet(ctx, id)
	if err != nil {
		return err
	}
	if len(patch) == 0 { // no flag of sked edit's own: the editor says what changes
		if patch, err = editInEditor(before, a.env); err != nil {
			return err
		}
		if len(patch) == 0 {
			fmt.Fprintf(a.env.Stdout, "no change to job %s\n", jobLabel(before))
			return nil
		}
	}
	after, err := a.c.JobPatch(ctx, before.ID, patch)
	if err != nil {
		return err
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
	if after.NextRunAt != nil {
		fmt.Fprintf(a.env.Stdout, "next run %s\n", timeText(after.NextRunAt))
	}
	return nil
}

// editInEditor opens job's definition as YAML in the user's editor and
// returns the merge patch of what was changed: changed fields set, removed
// ones null.
func editInEditor(job db.Job, env Env) (map[string]any, error) {
	def := skedapi.RequestOf(job)
	old, err := orderedFields(def)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# The definition of job %s. Change it, save and quit; remove a field to set it back\n"+
		"# to its default; leave it as it is to change nothing.\n", jobLabel(job))
	if err := writeYAML(&buf, def); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sked-edit")
	if err != nil {
		return nil, fmt.Errorf("edit: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, cmp.Or(job.Name, job.ID)+".yaml")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		return nil, fmt.Errorf("edit: %w", err)
	}
	editor := cmp.Or(env.Getenv("VISUAL"), env.Getenv("EDITOR"), "vi")
	cmd := exec.Command("sh", "-c", editor+` "$1"`, "sh", path)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("edit with %s: %w", editor, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("edit: %w", err)
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
