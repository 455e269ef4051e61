package cli

import (
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/handlers"
)

// TestClient_ServerList: a client command given several servers (--server
// A,B, as sked work takes them, or SKED_SERVER) talks to the first that is
// ready, else to the first that answers, else fails as for its first; it
// refused a list before.
func TestClient_ServerList(t *testing.T) {
	node := func(t *testing.T, ready error) (url string, s db.Store) {
		t.Helper()
		store := sqlitetest.Open(t)
		srv := httptest.NewServer(handlers.New(handlers.Config{Store: store, ReadyFunc: func(context.Context) error { return ready }}))
		t.Cleanup(srv.Close)
		return srv.URL, store
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	up, upStore := node(t, nil)
	down, downStore := node(t, errors.New("database out of reach"))
	names := func(t *testing.T, s db.Store) []string {
		t.Helper()
		jobs, _, err := s.JobList(context.Background(), db.JobListParams{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, j := range jobs {
			out = append(out, j.Name)
		}
		return out
	}

	code, _, stderr := mainOf("add", "--type", "t", "--name", "first", "--server", closed+","+down+","+up)
	if code != 0 || len(names(t, upStore)) != 1 || len(names(t, downStore)) != 0 {
		t.Fatalf("add to a closed port, a node not ready and a ready one: exit %d (%s); jobs on the ready one %v, on the other %v; want it on the ready one",
			code, stderr, names(t, upStore), names(t, downStore))
	}
	var out strings.Builder
	env := Env{Getenv: func(k string) string {
		if k == "SKED_SERVER" {
			return closed + "," + down
		}
		return ""
	}, Stdout: &out, Stderr: &out}
	if code := Main(context.Background(), []string{"add", "--type", "t", "--name", "second"}, env); code != 0 || len(names(t, downStore)) != 1 {
		t.Fatalf("add with SKED_SERVER naming a closed port and a node not ready: exit %d (%s); jobs on the node %v; want it there, the only one answering",
			code, out.String(), names(t, downStore))
	}
	code, _, stderr = mainOf("ls", "--server", closed+","+closed+"/")
	if code != ExitUnreachable || !strings.Contains(stderr, "cannot connect to "+closed) {
		t.Errorf("ls with no server answering: exit %d, said %q; want exit %d, the first's connection refused", code, stderr, ExitUnreachable)
	}
}
