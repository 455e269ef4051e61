package db_test

import (
	"errors"
	"testing"

	"github.com/sked-dev/sked/db"
)

// TestValidationError_Error checks that the error names its field once:
// most messages begin with it already.
func TestValidationError_Error(t *testing.T) {
	for _, c := range []struct {
		err  db.ValidationError
		want string
	}{
		{db.ValidationError{Field: "type", Msg: "type is required"}, "type is required"},
		{db.ValidationError{Field: "schedule", Msg: `schedule: "bad" is not a cron expression`}, `schedule: "bad" is not a cron expression`},
		{db.ValidationError{Field: "schedule", Msg: `"@daly" never fires`}, `schedule: "@daly" never fires`},
		{db.ValidationError{Field: "run", Msg: "runAt is in the past"}, "run: runAt is in the past"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("%+v: Error() = %q, want %q", c.err, got, c.want)
		}
		if !errors.Is(&c.err, db.ErrInvalid) {
			t.Errorf("%+v is not ErrInvalid", c.err)
		}
	}
}
