package postgres_test

import (
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/dbtest"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
)

func TestStore_Conformance(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, now func() time.Time, rnd func() float64) db.Store {
		s := postgrestest.Open(t)
		s.NowFunc, s.RandFunc = now, rnd
		return s
	})
}
