// Package server wires sked together: it opens the store, builds the HTTP
// API, the dispatcher pool and the reaper, serves until its context ends and
// shuts them down in order. `sked serve` is a thin layer of flags over it.
//
// A Go program embeds sked by creating a Server, registering its own
// handlers with Handle, calling Start, and then Run. Between the two it may
// mount Handler (the API and the dashboard) in its own router and create
// jobs in-process with Enqueue, or, on PostgreSQL, inside its own
// transactions with EnqueueTx. With Config.Addr empty sked opens no
// listener of its own. See docs/embedding.md.
package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sked-dev/sked/clock"
	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/schema"
	"github.com/sked-dev/sked/handlers"
	"github.com/sked-dev/sked/internal/buildinfo"
	"github.com/sked-dev/sked/metrics"
	"github.com/sked-dev/sked/notify"
	"github.com/sked-dev/sked/web"
	"github.com/sked-dev/sked/worker"
)

// Config is what a Server runs with. Zero values mean the defaults each
// field names.
type Config struct {
	DB string // SQLite file, or a postgres:// URL (see OpenStore); default "sked.db"
	// DBWait is how long Start waits for a PostgreSQL server that cannot be
	// reached yet (see OpenStore); default DefaultDBWait, negative: none.
	DBWait time.Duration
	// Addr is the address sked's own HTTP server listens on, such as
	// "127.0.0.1:8080". Empty (and no Listener): sked listens nowhere, and
	// the embedding program serves Handler itself.
	Addr     string
	Listener net.Listener // if set, serve on it instead of listening on Addr
	Workers  int          // user jobs run at once by this process; default worker.DefaultSlots
	// NotifyWorkers are the slots, apart from Workers, of the jobs that
	// deliver notifications and pings (notify.Types): user jobs cannot
	// take them, and deliveries cannot take the Workers. Default
	// DefaultNotifyWorkers.
	NotifyWorkers       int
	Lease               time.Duration // default db.DefaultLease
	Grace               time.Duration // shutdown wait for running jobs; default worker.DefaultGrace
	EnableExec          bool          // run jobs of type exec
	ExecEnv             []string      // variables of this process's environment that commands get too (see worker.ExecConfig)
	AllowPrivateTargets bool          // let http jobs call loopback and private addresses
	HTTPSecret          string        // sign http jobs' requests
	MaxBodyBytes        int64         // default 1 MiB
	// MaxClaimWaits bounds the remote workers' claims (POST /claims) that
	// wait for a due job at once; zero means handlers.DefaultMaxClaimWaits.
	MaxClaimWaits int
	// Limits of the HTTP server (http.Server fields of the same names);
	// zero means the Default… constants. A client that sends its headers
	// slower than ReadHeaderTimeout (slowloris) is cut off.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	MaxHeaderBytes                                            int // default DefaultMaxHeaderBytes
	// Tokens are the bearer tokens that may use the whole API. With no
	// tokens of any role there is no authentication, which Start refuses
	// on a listener beyond loopback unless Insecure.
	Tokens []string
	// WorkerTokens may only claim jobs and report on their runs, and
	// ReadTokens only read (see handlers.Config). A token has one role.
	WorkerTokens, ReadTokens []string
	// Insecure lets sked's own listener (Addr or Listener) be reachable
	// beyond loopback without Tokens. It says nothing of Handler, which
	// is served wherever the embedding program serves it.
	Insecure bool
	// AllowedHosts are the Host names (without port) the API serves besides
	// localhost, 127.0.0.1 and [::1] when there are no Tokens, e.g. the name
	// a reverse proxy forwards (see handlers.Config.AllowedHosts).
	AllowedHosts []string
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client, for the limit on wrong tokens (see
	// handlers.Config.TrustedProxies). None: X-Forwarded-For is not read.
	TrustedProxies []netip.Prefix
	// Retention is the age past which finished history is pruned (see
	// db.Pruner); zero means worker.DefaultRetention, negative never.
	Retention time.Duration
	// ClaimAhead is how long before they are due the pool claims jobs (see
	// worker.PoolConfig.ClaimAhead); zero means worker.DefaultClaimAhead,
	// negative only due jobs. A test clock claims only due jobs.
	ClaimAhead time.Duration
	// TestClock, when not zero, runs the server on a virtual clock stopped
	// at this time and moved only by POST /test/clock.
	TestClock time.Time
	// JobDefaults overrides, by job type (AnyType: every other type), the
	// attempts and backoff of jobs that do not set them; zero fields keep
	// sked's own (db.DefaultsFor).
	JobDefaults map[string]db.Defaults
	// NotifySinks receive dead jobs, quiet and recovered schedules and
	// clock steps, as http jobs, and as email jobs for SMTP sinks (kind
	// email is served when there is one); empty: no notifications.
	NotifySinks []notify.Sink
	// PublicURL is the address people open the dashboard at; every
	// notification then links to the job's page. Empty: no links.
	PublicURL string
	Logger    *slog.Logger // nil: discard
}

// Server is one sked process: API, dispatcher, workers and reaper. Its
// methods are safe for concurrent use, Handle excepted.
type Server struct {
	cfg      Config
	handlers map[string]worker.HandlerFunc
	mailer   *worker.Mailer // nil without SMTP sinks

	mu      sync.Mutex
	built   *parts // set by Start; guarded by mu
	running bool   // Run was called; guarded by mu
	closed  bool   // guarded by mu
}

// parts is what Start builds and Run runs: the open store and everything
// over it.
type parts struct {
	ln       net.Listener // listening on Config.Addr; nil with a Config.Listener or no Addr
	lock     *os.File     // the single-instance lock of a SQLite store; nil on PostgreSQL
	store    db.Store
	api      *handlers.API
	handler  http.Handler // the API and the dashboard
	pool     pools
	services []func(context.Context) error // run by Run until shutdown, besides the pools
	// shuttingDown is closed when shutdown begins, so that waiting claims
	// answer at once and new ones are refused.
	shuttingDown chan struct{}
}

// ErrClosed is returned by the methods of a Server that Run or Close has
// closed.
var ErrClosed = errors.New("sked server closed")

// builtinTypes are the job types sked serve runs itself (New, Start),
// whatever handlers a program registers: no remote worker may claim them.
// The deliveries' types are among them: they carry the server's secrets.
var builtinTypes = append([]string{"http", "email", "exec"}, notify.Types()...)

// dbLabel names the database at dsn in logs: a PostgreSQL URL without its
// password, a SQLite file by its absolute path (a relative one names a
// file in whatever directory sked was started from).
func dbLabel(dsn string) string {
	if postgres.IsURL(dsn) {
		return postgres.Redacted(dsn)
	}
	if abs, err := filepath.Abs(dsn); err == nil {
		return abs
	}
	return dsn
}

// BuiltinType reports whether typ is a type sked serve runs itself, which
// no remote worker may claim.
func BuiltinType(typ string) bool { return slices.Contains(builtinTypes, typ) }

// ownTypes are the types the pools of a server running kinds keep to
// themselves, which POST /claims refuses: the built-in ones, and each type
// the embedding program registered with Handle, whose jobs are its Go
// handler's to run (a remote worker would run them with other code, or
// report them done unrun).
func ownTypes(kinds map[string]worker.HandlerFunc) []string {
	own := slices.AppendSeq(slices.Clone(builtinTypes), maps.Keys(kinds))
	slices.Sort(own)
	return slices.Compact(own)
}

// New returns a server for cfg with the built-in kinds registered: http,
// email when cfg has an SMTP sink, and exec when enabled (Start adds it,
// unless Handle registered "exec").
func New(cfg Config) *Server {
	cfg.DB = cmp.Or(cfg.DB, "sked.db")
	cfg.Workers = cmp.Or(cfg.Workers, worker.DefaultSlots)
	cfg.NotifyWorkers = cmp.Or(cfg.NotifyWorkers, DefaultNotifyWorkers)
	cfg.Lease = cmp.Or(cfg.Lease, db.DefaultLease)
	cfg.DBWait = cmp.Or(cfg.DBWait, DefaultDBWait)
	cfg.Grace = cmp.Or(cfg.Grace, worker.DefaultGrace)
	cfg.Retention = cmp.Or(cfg.Retention, worker.DefaultRetention)
	cfg.ReadHeaderTimeout = cmp.Or(cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	cfg.ReadTimeout = cmp.Or(cfg.ReadTimeout, DefaultReadTimeout)
	cfg.WriteTimeout = cmp.Or(cfg.WriteTimeout, DefaultWriteTimeout)
	cfg.IdleTimeout = cmp.Or(cfg.IdleTimeout, DefaultIdleTimeout)
	cfg.MaxHeaderBytes = cmp.Or(cfg.MaxHeaderBytes, DefaultMaxHeaderBytes)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, handlers: map[string]worker.HandlerFunc{
		"http": worker.HTTP(worker.HTTPConfig{AllowPrivate: cfg.AllowPrivateTargets, Trusted: sinkOrigins(cfg.NotifySinks), Secret: cfg.HTTPSecret}),
	}}
	var smtp []notify.SMTP
	for _, sink := range cfg.NotifySinks {
		if sink.SMTP != nil {
			smtp = append(smtp, *sink.SMTP)
		}
	}
	if len(smtp) > 0 {
		s.mailer = worker.NewMailer(worker.MailerConfig{Sinks: smtp})
		s.handlers["email"] = s.mailer.Handle
	}
	return s
}

// Handle registers h for jobs of type typ, run by this process's pool, and
// only by it: POST /claims through this server refuses typ. Call it before
// Start (or Run); a later registration of the same type replaces the
// earlier. It panics after Start (the pool claims only the types it was
// built with, and a handler registered later would never run), for a type
// that no job may have, for a type of sked's own deliveries (notify.Types,
// run by the handlers of http and email), and for a nil h.
func (s *Server) Handle(typ string, h worker.HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		panic("server: Handle(" + strconv.Quote(typ) + ") called after Close: a closed server runs nothing; make a new one with New")
	case s.built != nil:
		panic("server: Handle(" + strconv.Quote(typ) + ") called after Start: register every handler before Start or Run")
	case !handlers.IsJobType(typ):
		panic("server: Handle(" + strconv.Quote(typ) + "): not a job type; give letters, digits and _ . : -, such as \"thumbnail\"")
	case slices.Contains(notify.Types(), typ):
		panic("server: Handle(" + strconv.Quote(typ) + "): the type of sked's own notification deliveries, run by the handler of " +
			"http or email; give your jobs a type of their own")
	case h == nil:
		panic("server: Handle(" + strconv.Quote(typ) + ", nil): give the function that runs its jobs")
	}
	s.handlers[typ] = h
}

// Start opens and checks the store and builds the API, the pool and the
// services over it, without running them: after Start, Handler and Enqueue
// work, and jobs created wait for Run. It listens on Config.Addr (when no
// Config.Listener is given), so that an address in use fails here, and
// refuses a listener beyond loopback without Tokens unless Config.Insecure. A started server that is
// not Run must be closed with Close.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case s.built != nil:
		return errors.New("sked server already started")
	}
	if err := checkConfig(s.cfg); err != nil {
		return err
	}
	if err := checkTokens(s.cfg); err != nil {
		return err
	}
	if err := checkExposure(s.cfg); err != nil {
		return err
	}
	p, err := s.build(ctx)
	if err != nil {
		return err
	}
	s.built = p
	return nil
}

// build opens the store and makes the parts over it. On failure it closes
// what it opened.
func (s *Server) build(ctx context.Context) (_ *parts, err error) {
	cfg, log := s.cfg, s.cfg.Logger
	p := &parts{shuttingDown: make(chan struct{})}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if cfg.Listener == nil && cfg.Addr != "" {
		if p.ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
		}
	}
	if p.lock, err = LockStore(cfg.DB); err != nil {
		return nil, err
	}
	kinds := maps.Clone(s.handlers)
	if _, ok := kinds["exec"]; cfg.EnableExec && !ok {
		// The supervisors hold the lock until their commands are gone, so
		// a sked serve started after this one was killed starts none of
		// its jobs while they run.
		execCfg := worker.ExecConfig{Env: cfg.ExecEnv}
		if p.lock != nil {
			execCfg.Hold = []*os.File{p.lock}
		}
		kinds["exec"] = worker.Exec(execCfg)
	}
	store, err := OpenStore(ctx, cfg.DB, cfg.DBWait, log)
	if err != nil {
		return nil, err
	}
	p.store = store
	switch v := MigratedOf(store); {
	case v.From == 0:
		log.Info("created the database's schema", "db", dbLabel(cfg.DB), "schema", v.To)
	case v.From != v.To:
		log.Info("migrated the database's schema", "db", dbLabel(cfg.DB), "from", v.From, "to", v.To)
	}
	engineOf(store).DefaultsFunc = defaultsFunc(cfg.JobDefaults)
	engineOf(store).Logger = log
	if err := checkAtStart(ctx, store, cfg.DB, log); err != nil {
		return nil, err
	}
	// The pool, the reaper, the pruner and the worker API write through obs,
	// which observes claims, completions, lease expirations and pruned
	// history for /metrics.
	mtr := metrics.New(metrics.Config{Stats: store, NowFunc: store.Now, Logger: log})
	obs := mtr.Store(store)
	notifier := &notify.Notifier{Store: store, Sinks: cfg.NotifySinks, PublicURL: cfg.PublicURL}

	var guard *clock.Guard
	countStep := mtr.WatchClock(func() bool { hold, _ := guard.Holding(); return hold })
	guard, virtual := newClock(cfg.TestClock, log, func(st clock.Step) {
		countStep(st)
		if st.Backward() && len(cfg.NotifySinks) > 0 {
			if err := notifier.Notify(context.WithoutCancel(ctx), notify.ClockStep(st.From, st.To)); err != nil {
				log.Error("notify clock step", "err", err)
			}
		}
	})
	if err := useClock(store, guard, virtual != nil); err != nil {
		return nil, err
	}

	disabled := map[string]string{}
	if !cfg.EnableExec {
		disabled["exec"] = "exec jobs run commands on this machine and are off on this server; start sked serve with --enable-exec (embedded: Config.EnableExec) to allow them " +
			"(with several nodes, give every node the same flags)"
	}
	validate := worker.ValidatePayload
	if s.mailer != nil {
		validate = s.mailer.ValidatePayload
	} else {
		disabled["email"] = "email jobs send through an SMTP sink of sked serve, and none is configured; give one with --notify smtp://user:password@host:587?to=you@example.com (embedded: Config.NotifySinks)"
		// Told of when they wait (warnWaiting); refused at create below
		// as every delivery type is.
		disabled[notify.TypeEmail] = disabled["email"]
	}
	checkNotify := notifier.CheckSettings
	if !cfg.AllowPrivateTargets {
		validate = refusingPrivateTargets(validate, sinkOrigins(cfg.NotifySinks))
		checkNotify = refusingPrivateSinks(checkNotify, sinkOrigins(cfg.NotifySinks))
	}
	warnWaiting(ctx, store, disabled, log)
	refused := maps.Clone(disabled)
	for _, typ := range notify.Types() {
		refused[typ] = typ + " jobs are sked's own notification and ping deliveries, which only its notifier makes; " +
			"to call a URL give the type http (or email, to send mail through an SMTP sink)"
	}
	hostname, _ := os.Hostname()
	workerID := handlers.ServeWorkerPrefix + worker.ProcessID(hostname)
	if err := reclaimPredecessor(ctx, store, hostname, log); err != nil {
		return nil, err
	}
	poolCfg := func(handlers map[string]worker.HandlerFunc, id string, slots int) worker.PoolConfig {
		return worker.PoolConfig{
			Store: obs, Handlers: handlers, WorkerID: id,
			Slots: slots, Lease: cfg.Lease, Grace: cfg.Grace, ClaimAhead: claimAhead(cfg),
			NextDueFunc: store.JobNextDue, NowFunc: store.Now, Logger: log, MaxIdle: jitteredIdle(worker.DefaultMaxIdle),
		}
	}
	// The deliveries run in a pool of their own, under a worker id of
	// their own (a pool's id is its alone, see above).
	pool := pools{
		jobs:       worker.NewPool(poolCfg(kinds, workerID, cfg.Workers)),
		deliveries: worker.NewPool(poolCfg(notify.Handlers(kinds), workerID+db.DeliveriesPoolSuffix, cfg.NotifyWorkers)),
	}
	reaper := &worker.Reaper{Store: obs, Logger: log}
	sampler := web.NewSampler(web.SamplerConfig{Stats: store, Activity: store, NowFunc: store.Now, Logger: log})

	sweeper := &worker.Sweeper{Store: store, Notifier: notifier, WakeFunc: pool.Wake, NowFunc: store.Now, Logger: log}
	sweeper.WatchStart(ctx)
	newsTo(store, sweeper)
	var testClock handlers.TestClock
	if virtual != nil {
		testClock = &movedClock{Virtual: virtual, pool: pool, moved: sweeper.Wake}
		log.Warn("running on a test clock: time moves only by POST /test/clock", "now", virtual.Now())
	}
	p.pool = pool
	// The API's wake-ups name the type of the job they are for, so that a
	// delivery retried or resumed through it wakes the deliveries' pool,
	// and a job created does not.
	p.api = handlers.New(handlers.Config{
		Store: cancelsAtOnce{obs, pool}, Wake: pool.WakeFor, StoreAnnounces: announces(store), ValidatePayload: validate, CheckNotifyFunc: checkNotify,
		Tokens: cfg.Tokens, WorkerTokens: cfg.WorkerTokens, ReadTokens: cfg.ReadTokens, AllowedHosts: cfg.AllowedHosts, TrustedProxies: cfg.TrustedProxies, Metrics: mtr.Handler(), ReadyFunc: clockReady(guard, store.Ready),
		DisabledTypes: refused, OwnTypes: ownTypes(kinds), MaxBodyBytes: cfg.MaxBodyBytes, MaxClaimWaits: cfg.MaxClaimWaits, Logger: log, Shutdown: p.shuttingDown,
		TestClock: testClock, SeriesFunc: func() any { return sampler.Series() },
	})
	mtr.WatchClaimWaits(p.api.ClaimWaits)
	mtr.WatchAuthFailures(p.api.AuthFailures)
	p.handler = web.Mount(p.api)

	p.services = []func(context.Context) error{
		reaper.Run, sampler.Run, sweeper.Run,
		func(ctx context.Context) error {
			return forwardWakeups(ctx, store, func(due map[string]int) { pool.WakeFor(due); p.api.WakeClaims(due) }, log)
		},
	}
	if pruner := newPruner(obs, cfg.Retention, log); pruner != nil {
		p.services = append(p.services, pruner.Run)
	}
	if cp := newCheckpointer(store, mtr, log); cp != nil {
		p.services = append(p.services, cp.Run)
	}
	return p, nil
}

// close closes the store and then releases the lock.
func (p *parts) close() error {
	var err error
	if p.ln != nil {
		_ = p.ln.Close() // already closed by the HTTP server that served it
	}
	if p.store != nil {
		err = p.store.Close()
	}
	if p.lock != nil {
		err = errors.Join(err, p.lock.Close())
	}
	return err
}

// Handler is the whole HTTP API and the dashboard, with the auth of
// Config.Tokens and Config.AllowedHosts, for the embedding program to serve
// in its own router, also under a prefix:
//
//	mux.Handle("/sked/", http.StripPrefix("/sked", srv.Handler()))
//
// It is what sked's own listener serves. It panics before Start.
func (s *Server) Handler() http.Handler {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.built == nil {
		panic("server: Handler called before Start")
	}
	return s.built.handler
}

// parts returns what Start built; an error before Start and after Close.
func (s *Server) parts() (*parts, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, ErrClosed
	case s.built == nil:
		return nil, errors.New("sked server not started: call Start (or Run) first")
	}
	return s.built, nil
}

// Close closes the store of a started server that was not Run (Run closes
// it when it returns; while Run runs, Close refuses: cancel Run's context).
// Later calls return nil.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running && !s.closed {
		return errors.New("sked server running: cancel the context of Run to stop it")
	}
	return s.close()
}

// close marks s closed and closes what Start opened, once. s.mu is held.
func (s *Server) close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if s.built == nil {
		return nil
	}
	return s.built.close()
}

// dashboardURL is the address a browser opens the dashboard at, served on
// addr: its host and port, with localhost for a wildcard host (0.0.0.0,
// [::]: every address of the machine), which a browser cannot open.
func dashboardURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil { // not host:port (a unix socket): as it is
		return "http://" + addr.String() + "/"
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// Run starts the server if Start has not, then serves until ctx is done (or,
// on PostgreSQL, until a node of a newer sked migrates the database past
// this binary: Run then returns an error wrapping schema.ErrNewer) and
// shuts down in reverse order: refuse new claims and stop claiming; let
// running jobs finish within the grace period and hand back the rest,
// while the API still serves the heartbeats and completions of the remote
// workers' runs claimed through it, waiting for those too within the grace
// period; stop taking requests; close the store. It listens on Config.Listener or Config.Addr, or
// nowhere when both are empty; listening, it logs the dashboard's URL
// (dashboardURL).
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	closed, started, running := s.closed, s.built != nil, s.running
	s.running = true
	s.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case running:
		return errors.New("sked server already running")
	case !started:
		if err := s.Start(ctx); err != nil {
			s.mu.Lock()
			s.running = false
			s.mu.Unlock()
			return err
		}
	}
	s.mu.Lock()
	p := s.built // set by Start; Close refuses while running
	s.mu.Unlock()
	cfg, log := s.cfg, s.cfg.Logger
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if cerr := s.close(); cerr != nil {
			log.Warn("close store", "err", cerr)
		}
	}()

	var (
		srv *http.Server
		err error
	)
	ln, addr := cfg.Listener, "none (Handler is served by the embedding program)"
	if ln == nil {
		ln = p.ln // Start's, on Config.Addr
	}
	if ln != nil {
		addr = ln.Addr().String()
		srv = &http.Server{
			Handler:           p.handler,
			ReadHeaderTimeout: cfg.ReadHeaderTimeout,
			ReadTimeout:       cfg.ReadTimeout,
			WriteTimeout:      cfg.WriteTimeout,
			IdleTimeout:       cfg.IdleTimeout,
			MaxHeaderBytes:    cfg.MaxHeaderBytes,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
	}
	log.Info("sked serving", "addr", addr, "db", dbLabel(cfg.DB), "workers", cfg.Workers, "notify_workers", cfg.NotifyWorkers,
		"types", strings.Join(p.pool.Types(), ","), "version", buildinfo.Read().Version)
	if ln != nil {
		log.Info("dashboard", "url", dashboardURL(ln.Addr()))
	}
	if cfg.EnableExec && !cfg.authenticates() {
		log.Warn("exec jobs are on and the API takes no token: any program or user that can reach it can run "+
			"commands as this process's user; set a token (SKED_TOKEN) so that only its holders can", "addr", addr)
	}

	// Background services outlive the request context so that shutdown can
	// order them.
	svcCtx, stopServices := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServices()
	var services errgroup.Group
	for _, run := range p.services {
		services.Go(func() error { return run(svcCtx) })
	}
	poolCtx, stopPool := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPool()
	poolDone := make(chan error, 1)
	go func() { poolDone <- p.pool.Run(poolCtx) }()

	serveErr := make(chan error, 1)
	if srv != nil {
		go func() { serveErr <- srv.Serve(ln) }()
	}
	superseded := make(chan error, 1)
	if p.lock == nil { // PostgreSQL: other nodes, of another version, share the database
		go func() { superseded <- watchSchema(svcCtx, p.store.Ready, schemaWatchEvery) }()
	}
	select {
	case err = <-serveErr:
		err = fmt.Errorf("serve http: %w", err)
	case err = <-superseded: // never nil before svcCtx ends, after this select
		log.Error("a newer sked migrated the database past this binary; shutting down so that this version writes to it no more "+
			"(it does not know the newer schema's columns and rules): start the new version in its place", "err", err, "grace", cfg.Grace)
		err = fmt.Errorf("stopped: %w", err)
	case <-ctx.Done():
		log.Info("shutting down", "grace", cfg.Grace)
	}
	close(p.shuttingDown)
	stopPool()
	if err == nil {
		s.drainRemote(ctx, p)
	}
	if perr := <-poolDone; perr != nil {
		err = errors.Join(err, perr)
	}
	if srv != nil {
		shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if serr := srv.Shutdown(shutCtx); serr != nil {
			log.Warn("http shutdown", "err", serr)
		}
	}
	stopServices()
	if werr := services.Wait(); werr != nil {
		err = errors.Join(err, werr)
	}
	log.Info("stopped")
	return err
}

// schemaWatchEvery is how often a server on PostgreSQL checks that no
// newer sked migrated the database it shares with other nodes.
const schemaWatchEvery = 5 * time.Second

// watchSchema calls ready every interval until it reports the database's
// schema newer than this binary (schema.ErrNewer: a node of a newer sked
// migrated it, as in a rolling upgrade), and returns that error; nil when
// ctx ends first. Other errors are left to /readyz, which reports them.
func watchSchema(ctx context.Context, ready func(context.Context) error, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := ready(ctx); errors.Is(err, schema.ErrNewer) {
				return err
			}
		}
	}
}

// drainRemote waits, up to the grace period, for the runs that remote
// workers claimed through this server to be reported (through it or
// another node) or their leases to run out, while the API still serves
// their heartbeats and completions.
func (s *Server) drainRemote(ctx context.Context, p *parts) {
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Grace)
	defer cancel()
	if left := p.api.Drain(drainCtx); left > 0 {
		s.cfg.Logger.Warn("grace period over; remote workers' runs claimed here are left to their leases", "running", left)
	}
}

// claimAhead is the pool's PoolConfig.ClaimAhead for cfg. On a test clock
// it is off: the pool waits for a job's due time in real time, and a
// virtual clock moves only when told.
func claimAhead(cfg Config) time.Duration {
	if !cfg.TestClock.IsZero() {
		return -1
	}
	return cfg.ClaimAhead
}

// warnWaiting logs a warning for each type this server does not run
// (disabled, with why) of which ready jobs wait: made when it ran them, or
// for another node, they wait for a worker that does, which is easy to miss
// after a restart without the flag.
func warnWaiting(ctx context.Context, store db.Store, disabled map[string]string, log *slog.Logger) {
	for _, typ := range slices.Sorted(maps.Keys(disabled)) {
		if next, ok, err := store.JobNextDue(ctx, []string{typ}); err == nil && ok {
			log.Warn("jobs of a type this server does not run are waiting: only another node or a sked work that serves the type runs them",
				"type", typ, "next_due", next, "why", disabled[typ])
		}
	}
}

// refusingPrivateTargets is validate that also refuses, at create, an http
// job whose URL names a loopback or private address outright, which this
// server's http kind would refuse to call (worker.RefusePrivateTarget).
func refusingPrivateTargets(validate func(string, json.RawMessage) error, trusted worker.Origins) func(string, json.RawMessage) error {
	return func(typ string, payload json.RawMessage) error {
		if err := validate(typ, payload); err != nil || typ != "http" {
			return err
		}
		return worker.RefusePrivateTarget(payload, trusted)
	}
}

// refusingPrivateSinks wraps check, a job's notification settings' check,
// to also refuse its own sinks and ping URL that name a loopback or private
// address outright, as refusingPrivateTargets does for http jobs: they are
// called through the http kind, which would refuse each call.
func refusingPrivateSinks(check func(*db.Notify) error, trusted worker.Origins) func(*db.Notify) error {
	return func(s *db.Notify) error {
		if err := check(s); err != nil || s == nil {
			return err
		}
		for _, spec := range s.Sinks {
			sink, err := notify.ParseSink(spec)
			if err != nil {
				return fmt.Errorf("read notify.sinks: %w", err) // check took it
			}
			if sink.URL == "" { // an email sink
				continue
			}
			if err := worker.RefusePrivateURL("notify.sinks", sink.URL, trusted); err != nil {
				return err
			}
		}
		if s.Ping == "" {
			return nil
		}
		return worker.RefusePrivateURL("notify.ping", s.Ping, trusted)
	}
}

// sinkOrigins are the origins of the http sinks of sinks: the operator's
// own notification targets, which http jobs call even when private targets
// are refused.
func sinkOrigins(sinks []notify.Sink) worker.Origins {
	urls := make([]string, len(sinks))
	for i, s := range sinks {
		urls[i] = s.URL // an email sink has none, which NewOrigins leaves out
	}
	return worker.NewOrigins(urls...)
}
