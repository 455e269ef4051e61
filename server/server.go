// Package server wires sked together: it opens the store, builds the HTTP
// API, the dispatcher pool and the reaper, serves until its context ends and
// shuts them down in order. `sked serve` is a thin layer of flags over it, and
// a Go program embeds sked by creating a Server, registering its own
// handlers with Handle and calling Run.
package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sked-dev/sked/clock"
	"github.com/sked-dev/sked/db"
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
	DB                  string        // SQLite file, or a postgres:// URL (see OpenStore); default "sked.db"
	Addr                string        // listen address; default "127.0.0.1:8080"
	Listener            net.Listener  // if set, serve on it instead of listening on Addr
	Workers             int           // jobs run at once by this process; default worker.DefaultSlots
	Lease               time.Duration // default db.DefaultLease
	Grace               time.Duration // shutdown wait for running jobs; default worker.DefaultGrace
	EnableExec          bool          // run jobs of type exec
	ExecEnv             []string      // variables of this process's environment that commands get too (see worker.ExecConfig)
	AllowPrivateTargets bool          // let http jobs call loopback and private addresses
	HTTPSecret          string        // sign http jobs' requests
	MaxBodyBytes        int64         // default 1 MiB
	// Limits of the HTTP server (http.Server fields of the same names);
	// zero means the Default… constants. A client that sends its headers
	// slower than ReadHeaderTimeout (slowloris) is cut off.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	MaxHeaderBytes                                            int // default DefaultMaxHeaderBytes
	// Tokens are the bearer tokens the API accepts; empty: no
	// authentication (sked serve refuses that beyond loopback).
	Tokens []string
	// AllowedHosts are the Host names (without port) the API serves besides
	// localhost, 127.0.0.1 and [::1] when there are no Tokens, e.g. the name
	// a reverse proxy forwards (see handlers.Config.AllowedHosts).
	AllowedHosts []string
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

// Server is one sked process: API, dispatcher, workers and reaper.
type Server struct {
	cfg      Config
	handlers map[string]worker.HandlerFunc
	mailer   *worker.Mailer // nil without SMTP sinks
}

// New returns a server for cfg with the built-in kinds registered: http,
// email when cfg has an SMTP sink, and exec when enabled (Run adds it,
// unless Handle registered "exec").
func New(cfg Config) *Server {
	cfg.DB = cmp.Or(cfg.DB, "sked.db")
	cfg.Addr = cmp.Or(cfg.Addr, "127.0.0.1:8080")
	cfg.Workers = cmp.Or(cfg.Workers, worker.DefaultSlots)
	cfg.Lease = cmp.Or(cfg.Lease, db.DefaultLease)
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
		"http": worker.HTTP(worker.HTTPConfig{AllowPrivate: cfg.AllowPrivateTargets, Secret: cfg.HTTPSecret}),
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

// Handle registers h for jobs of type typ, run by this process's pool. Call
// it before Run; a later registration of the same type replaces the earlier.
func (s *Server) Handle(typ string, h worker.HandlerFunc) { s.handlers[typ] = h }

// Run opens the store and serves until ctx is done, then shuts down in
// reverse order: stop taking requests, stop claiming, let running jobs
// finish within the grace period and hand back the rest, close the store.
func (s *Server) Run(ctx context.Context) error {
	cfg, log := s.cfg, s.cfg.Logger
	lock, err := lockStore(cfg.DB)
	if err != nil {
		return err
	}
	defer lock.Close()
	kinds := maps.Clone(s.handlers)
	if _, ok := kinds["exec"]; cfg.EnableExec && !ok {
		// The supervisors hold the lock until their commands are gone, so
		// a sked serve started after this one was killed starts none of
		// its jobs while they run.
		execCfg := worker.ExecConfig{Env: cfg.ExecEnv}
		if lock != nil {
			execCfg.Hold = []*os.File{lock}
		}
		kinds["exec"] = worker.Exec(execCfg)
	}
	store, err := OpenStore(ctx, cfg.DB)
	if err != nil {
		return err
	}
	defer store.Close()
	engineOf(store).DefaultsFunc = defaultsFunc(cfg.JobDefaults)
	if err := checkAtStart(ctx, store, cfg.DB, log); err != nil {
		return err
	}
	// The pool, the reaper and the worker API write through obs, which
	// observes claims, completions and lease expirations for /metrics.
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
		return err
	}

	disabled := map[string]string{}
	if !cfg.EnableExec {
		disabled["exec"] = "exec jobs run commands on this machine and are off; start sked serve with --enable-exec to allow them"
	}
	validate := worker.ValidatePayload
	if s.mailer != nil {
		validate = s.mailer.ValidatePayload
	} else {
		disabled["email"] = "email jobs send through an SMTP sink of sked serve, and none is configured; give one with --notify smtp://user:password@host:587?to=you@example.com"
	}
	hostname, _ := os.Hostname()
	workerID := servePrefix(hostname) + strconv.Itoa(os.Getpid())
	if err := reclaimPredecessor(ctx, store, hostname, workerID, log); err != nil {
		return err
	}
	pool := worker.NewPool(worker.PoolConfig{
		Store: obs, Handlers: kinds, WorkerID: workerID,
		Slots: cfg.Workers, Lease: cfg.Lease, Grace: cfg.Grace, ClaimAhead: claimAhead(cfg),
		NextDueFunc: store.JobNextDue, NowFunc: store.Now, Logger: log, MaxIdle: jitteredIdle(worker.DefaultMaxIdle),
	})
	reaper := &worker.Reaper{Store: obs, Logger: log}
	sampler := web.NewSampler(web.SamplerConfig{Stats: store, Activity: store, NowFunc: store.Now, Logger: log})

	sweeper := &worker.Sweeper{Store: store, Notifier: notifier, WakeFunc: pool.Wake, NowFunc: store.Now, Logger: log}
	var testClock handlers.TestClock
	if virtual != nil {
		testClock = &movedClock{Virtual: virtual, pool: pool, moved: sweeper.Wake}
		log.Warn("running on a test clock: time moves only by POST /test/clock", "now", virtual.Now())
	}

	// Closed when shutdown begins, so that waiting claims answer at once.
	shuttingDown := make(chan struct{})
	srv := &http.Server{
		Handler: web.Mount(handlers.New(handlers.Config{
			Store: cancelsAtOnce{obs, pool}, Wake: pool.Wake, ValidatePayload: validate, CheckNotifyFunc: notifier.CheckSettings,
			Tokens: cfg.Tokens, AllowedHosts: cfg.AllowedHosts, Metrics: mtr.Handler(), ReadyFunc: clockReady(guard, store.Ready),
			DisabledTypes: disabled, MaxBodyBytes: cfg.MaxBodyBytes, Logger: log, Shutdown: shuttingDown,
			TestClock: testClock, SeriesFunc: func() any { return sampler.Series() },
		})),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(func() { close(shuttingDown) })
	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
		}
	}
	log.Info("sked serving", "addr", ln.Addr().String(), "db", redactDSN(cfg.DB), "workers", cfg.Workers,
		"types", strings.Join(pool.Types(), ","), "version", buildinfo.Read().Version)

	// Background services outlive the request context so that shutdown can
	// order them.
	svcCtx, stopServices := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServices()
	var services errgroup.Group
	services.Go(func() error { return pool.Run(svcCtx) })
	services.Go(func() error { return reaper.Run(svcCtx) })
	services.Go(func() error { return forwardWakeups(svcCtx, store, pool.Wake) })
	if pruner := newPruner(store, cfg.Retention, log); pruner != nil {
		services.Go(func() error { return pruner.Run(svcCtx) })
	}
	services.Go(func() error { return sampler.Run(svcCtx) })
	if cp := newCheckpointer(store, mtr, log); cp != nil {
		services.Go(func() error { return cp.Run(svcCtx) })
	}
	services.Go(func() error { return sweeper.Run(svcCtx) })

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	select {
	case err = <-serveErr:
		err = fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
		log.Info("shutting down", "grace", cfg.Grace)
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if serr := srv.Shutdown(shutCtx); serr != nil {
		log.Warn("http shutdown", "err", serr)
	}
	stopServices()
	if werr := services.Wait(); werr != nil {
		err = errors.Join(err, werr)
	}
	log.Info("stopped")
	return err
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
