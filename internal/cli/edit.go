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
	"time"

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

func editCmd(env Env) *cobra.Command {
	var unset []string
	cmd := &cobra.Command{
		Use:   "edit ID|NAME [--schedule CRON] [--payload JSON|@FILE] [flags]",
		Short: "Change a job's definition (a merge patch of the flags given, or in $EDITOR)",
		Long: "sked edit changes a job in place with PATCH /jobs/{id}: the flags given set their fields, --unset FIELD sets one\n" +
			"back to its default. Without flags it opens the job's definition as YAML in $VISUAL or $EDITOR and sends what you\n" +
			"changed. A running run finishes under the old definition; the next slot follows the new schedule; the change is\n" +
			"recorded on the job's timeline (sked show).",
		Example: "  sked edit nightly-backup --schedule '0 4 * * *' --tz Europe/Berlin\n  sked edit nightly-backup --unset jitter\n  sked edit nightly-backup",
		Args:    exactArgs(1, "one job id or name"),
	}
	var (
		str  = map[string]*string{}
		dur  = map[string]*time.Duration{}
		attp int
	)
	fs := cmd.Flags()
	for _, f := range []struct{ name, usage string }{
		{"name", "the job's new name"}, {"schedule", "cron expression, e.g. '30 2 * * 1-5' or '@every 90s'"},
		{"tz", "IANA time zone of the schedule"}, {"payload", "payload JSON, or @FILE to read it from a file"},
		{"overlap", "skip or queue_one"}, {"misfire", "run_once, skip or run_all"},
	} {
		str[f.name] = fs.String(f.name, "", f.usage)
	}
	fs.IntVar(&attp, "max-attempts", 0, "attempts before a firing gives up")
	for _, f := range []struct{ name, usage string }{
		{"timeout", "limit of one attempt"}, {"backoff", "first retry delay, doubled per attempt"},
		{"jitter", "spread the slots by a fixed offset inside this window"},
		{"expect-success-within", "mark the job quiet when no run succeeded for this long"},
	} {
		dur[f.name] = fs.Duration(f.name, 0, f.usage)
	}
	fs.StringArrayVar(&unset, "unset", nil, "set this field back to its default, e.g. jitter or expectSuccessWithin; repeat for several")
	fs.SortFlags = false
	return clientCommand(env, cmd, func(ctx context.Context, a *api, args []string) error {
		patch := map[string]any{}
		for _, ef := range editFields {
			if !fs.Changed(ef.flag) {
				continue
			}
			switch v := fs.Lookup(ef.flag).Value; {
			case ef.flag == "payload":
				p, err := readPayload(*str["payload"])
				if err != nil {
					return err
				}
				patch[ef.field] = p
			case v.Type() == "duration":
				patch[ef.field] = db.Duration(*dur[ef.flag])
			case v.Type() == "int":
				patch[ef.field] = attp
			default:
				patch[ef.field] = *str[ef.flag]
			}
		}
		for _, u := range unset {
			if _, ok := patch[u]; ok {
				return usagef("--unset %s: the field is also set by a flag", u)
			}
			patch[u] = nil
		}
		before, err := a.c.JobGet(ctx, args[0])
		if err != nil {
			return err
		}
		if !anyFlag(fs) {
			if patch, err = editInEditor(before, a.env); err != nil {
				return err
			}
			if len(patch) == 0 {
				fmt.Fprintf(a.stdout, "no change to job %s\n", jobLabel(before))
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
			fmt.Fprintf(a.stdout, "no change to job %s: it is so already\n", jobLabel(after))
			return nil
		}
		printChanges(a.stdout, "changed job "+jobLabel(after)+":", changes)
		if after.NextRunAt != nil {
			fmt.Fprintf(a.stdout, "next run %s\n", timeText(after.NextRunAt))
		}
		return nil
	})
}

// anyFlag reports whether a flag of sked edit's own was given.
func anyFlag(fs *pflag.FlagSet) bool {
	for _, ef := range editFields {
		if fs.Changed(ef.flag) {
			return true
		}
	}
	return fs.Changed("unset")
}

// editInEditor opens job's definition as YAML in the user's editor and
// returns the merge patch of what was changed: changed fields set, removed
// ones null.
func editInEditor(job db.Job, env Env) (map[string]any, error) {
	old, err := orderedFields(skedapi.RequestOf(job))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# The definition of job %s. Change it, save and quit; remove a field to set it back\n"+
		"# to its default; leave it as it is to change nothing.\n", jobLabel(job))
	if err := writeYAML(&buf, skedapi.RequestOf(job)); err != nil {
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
		case !sameJSON(v, []byte(f.value)):
			patch[f.key] = v
		}
		delete(edited, f.key)
	}
	for k, v := range edited {
		patch[k] = v
	}
	return patch, nil
}

// sameJSON reports whether a and b are the same JSON but for spacing.
func sameJSON(a, b []byte) bool {
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}
