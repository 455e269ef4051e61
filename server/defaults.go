package server

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/engine"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/handlers"
)

// AnyType is the key of Config.JobDefaults that applies to every type not
// listed.
const AnyType = "*"

// ParseJobDefaults reads job defaults written TYPE=ATTEMPTS/BACKOFF,
// comma-separated, e.g. "http=10/5m,exec=3/10s,*=5/1s"; either half may be
// left empty ("exec=3/", "*=/30s") to keep sked's own.
func ParseJobDefaults(spec string) (map[string]db.Defaults, error) {
	out := map[string]db.Defaults{}
	for item := range strings.SplitSeq(spec, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		typ, v, ok := strings.Cut(item, "=")
		attempts, backoff, ok2 := strings.Cut(v, "/")
		if !ok || !ok2 || typ == "" {
			return nil, fmt.Errorf("job defaults %q: write TYPE=ATTEMPTS/BACKOFF, e.g. http=10/5m or *=3/10s", item)
		}
		if typ = strings.TrimSpace(typ); typ != AnyType && !handlers.IsJobType(typ) {
			return nil, fmt.Errorf("job defaults %q: %q is not a job type (letters, digits and _ . : -) nor * for every other type", item, typ)
		}
		var d db.Defaults
		var err error
		if attempts != "" {
			if d.MaxAttempts, err = strconv.Atoi(attempts); err != nil {
				return nil, fmt.Errorf("job defaults %q: attempts %q must be a whole number from 1 to %d", item, attempts, db.MaxAttempts)
			}
		}
		if backoff != "" {
			if d.Backoff, err = time.ParseDuration(backoff); err != nil {
				return nil, fmt.Errorf("job defaults %q: backoff %q must be a duration, such as 30s", item, backoff)
			}
		}
		if attempts != "" && d.MaxAttempts == 0 || backoff != "" && d.Backoff == 0 {
			return nil, fmt.Errorf("job defaults %q: write values above zero, or leave a half empty for sked's own", item)
		}
		if err := CheckDefaults(d); err != nil {
			return nil, fmt.Errorf("job defaults %q: %w", item, err)
		}
		out[typ] = d
	}
	return out, nil
}

// CheckDefaults refuses job defaults no job may have; a zero field keeps
// sked's own. A backoff is kept in whole milliseconds: a shorter one would
// be none.
func CheckDefaults(d db.Defaults) error {
	switch {
	case d.MaxAttempts < 0 || d.MaxAttempts > db.MaxAttempts:
		return fmt.Errorf("attempts must be from 1 to %d", db.MaxAttempts)
	case d.Backoff < 0 || d.Backoff > 0 && d.Backoff < time.Millisecond:
		return errors.New("backoff must be 1ms or more, the precision sked keeps")
	}
	return nil
}

// defaultsFunc is the store's DefaultsFunc for over: a type's own entry,
// else AnyType's, each field falling back to db.DefaultsFor.
func defaultsFunc(over map[string]db.Defaults) func(string) db.Defaults {
	return func(typ string) db.Defaults {
		o, ok := over[typ]
		if !ok {
			o = over[AnyType]
		}
		d := db.DefaultsFor(typ)
		return db.Defaults{MaxAttempts: cmp.Or(o.MaxAttempts, d.MaxAttempts), Backoff: cmp.Or(o.Backoff, d.Backoff)}
	}
}

// engineOf is the lifecycle engine store runs on.
func engineOf(store db.Store) *engine.Store {
	return byStore(store, func(s *sqlite.Store) *engine.Store { return s.Store }, func(s *postgres.Store) *engine.Store { return s.Store })
}

// byStore is onSQLite or onPostgres of store, whichever of the two it is.
func byStore[T any](store db.Store, onSQLite func(*sqlite.Store) T, onPostgres func(*postgres.Store) T) T {
	switch s := store.(type) {
	case *sqlite.Store:
		return onSQLite(s)
	case *postgres.Store:
		return onPostgres(s)
	}
	panic(fmt.Sprintf("server: a store of type %T", store))
}
