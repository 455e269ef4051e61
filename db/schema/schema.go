// Package schema migrates a database with goose and checks that its schema
// is the one this binary was built for, for every dialect alike: a database
// behind the binary is migrated (or, when only checked, reported with the
// command that migrates it), one ahead of it is refused, since this binary
// does not know the columns and rules a newer sked added.
package schema

import (
	"context"
	"errors"
	"fmt"

	"github.com/pressly/goose/v3"
)

// Errors Check returns, wrapped in an error naming both versions.
var (
	// ErrBehind means migrations of this binary are not applied yet.
	ErrBehind = errors.New("database schema is behind this binary's migrations")
	// ErrNewer means a newer sked migrated the database past what this
	// binary knows.
	ErrNewer = errors.New("database schema is newer than this binary")
)

// Check returns nil when the database is at this binary's last migration,
// and an error wrapping ErrBehind or ErrNewer, saying what to do, when it is
// not. It changes nothing but, on a database never migrated, goose's empty
// version table.
func Check(ctx context.Context, p *goose.Provider) error {
	current, target, err := p.GetVersions(ctx)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	return check(current, target)
}

// check is Check of a database at version current, for a binary whose last
// migration is target.
func check(current, target int64) error {
	switch {
	case current > target:
		return fmt.Errorf("%w: the database is at version %d, this sked knows versions up to %d; "+
			"it was migrated by a newer sked: run that version (or a later one), or restore the backup taken before the upgrade", ErrNewer, current, target)
	case current < target:
		return fmt.Errorf("%w: the database is at version %d, this sked needs %d; run sked migrate", ErrBehind, current, target)
	}
	return nil
}

// Versions are the schema versions a database was found at (From: 0 when
// never migrated) and left at (To) by Up.
type Versions struct{ From, To int64 }

// Up migrates the database to this binary's last migration, after refusing
// one that is newer, and says from which version to which. The caller
// serializes Up across processes.
func Up(ctx context.Context, p *goose.Provider) (Versions, error) {
	current, target, err := p.GetVersions(ctx)
	if err != nil {
		return Versions{}, fmt.Errorf("read schema version: %w", err)
	}
	v := Versions{From: current, To: current}
	if err := check(current, target); err == nil || !errors.Is(err, ErrBehind) {
		return v, err
	}
	if _, err := p.Up(ctx); err != nil {
		return v, fmt.Errorf("migrate: %w", err)
	}
	v.To = target
	return v, nil
}
