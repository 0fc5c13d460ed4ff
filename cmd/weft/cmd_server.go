package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/config"
	"github.com/weft-sched/weft/internal/gossip"
	"github.com/weft-sched/weft/internal/metrics"
	"github.com/weft-sched/weft/server"
)

// newLogger is a process's logger on stderr: text, or JSON objects one a
// line with asJSON (-log-json).
func newLogger(level string, asJSON bool) (hclog.Logger, error) {
	lvl := hclog.LevelFromString(level)
	if lvl == hclog.NoLevel {
		return nil, usagef("-log-level %q: use trace, debug, info, warn or error", level)
	}
	return hclog.New(&hclog.LoggerOptions{Name: "weft", Level: lvl, Output: stderr, JSONFormat: asJSON}), nil
}

func runServer(args []string) error {
	cfg := config.DefaultServer()
	fs := newFlagSet("server")
	config.RegisterFlags(fs, cfg)
	if err := loadConfig(fs, cfg, args, "server"); err != nil {
		return err
	}
	warning, err := config.CheckSecure("server", cfg.Bind, cfg.SecurityGaps(fileExists(gossip.KeyringFile(cfg.DataDir))), cfg.Insecure)
	if err != nil {
		return usagef("%v", err)
	}
	logger, err := newLogger(cfg.LogLevel, cfg.LogJSON)
	if err != nil {
		return err
	}
	tc, err := tlsConfigurator(cfg.TLS, cfg.Region)
	if err != nil {
		return err
	}
	maxApps, appGC, nodeGC, err := cfg.GC()
	if err != nil {
		return err
	}
	snaps, err := cfg.RaftSnapshots()
	if err != nil {
		return err
	}
	subcluster, routers, every, err := cfg.Federation()
	if err != nil {
		return err
	}
	unmanagedTimeout, err := cfg.UnmanagedAMTimeoutDuration()
	if err != nil {
		return err
	}
	maxNode, err := cfg.MaxNodeCapacity()
	if err != nil {
		return err
	}
	firstUID, lastUID, err := config.ParseUIDRange(cfg.DynamicUIDRange)
	if err != nil {
		return err
	}
	if cfg.GCPercent > 0 {
		debug.SetGCPercent(cfg.GCPercent)
	}
	stopWarning := warnInsecure(logger, warning)
	defer stopWarning()
	if err := metrics.Init(); err != nil {
		return err
	}
	srv, err := server.New(&server.Config{
		NodeID:           cfg.NodeID,
		DataDir:          cfg.DataDir,
		BindAddr:         cfg.Bind,
		RPCPort:          cfg.RPCPort,
		SerfPort:         cfg.SerfPort,
		BootstrapExpect:  cfg.BootstrapExpect,
		Join:             cfg.Join,
		Encrypt:          cfg.Encrypt,
		Build:            version,
		Logger:           logger,
		TLS:              tc,
		ACLEnabled:       cfg.ACL != nil && cfg.ACL.Enabled,
		RaftSkipIndex:    cfg.RaftSkipIndex,
		Limits:           rpcLimits(cfg.Limits),
		MaxCompletedApps: maxApps,
		AppGCThreshold:   appGC,
		NodeGCThreshold:  nodeGC,
		MaxNodeResources: maxNode,
		DynamicUIDs:      fsm.UIDRange{First: firstUID, Last: lastUID},

		RaftSnapshotInterval:    snaps.Interval,
		RaftSnapshotLogPercent:  snaps.LogPercent,
		RaftSnapshotMinLogBytes: snaps.MinLogBytes,
		RaftSnapshotThreshold:   snaps.Threshold,
		RaftTrailingLogs:        snaps.TrailingLogs,

		SubclusterID:        subcluster,
		Routers:             routers,
		SubclusterHeartbeat: every,
		UnmanagedAMTimeout:  unmanagedTimeout,
	})
	if err != nil {
		return err
	}
	_, stopHTTP, err := serveServerHTTP(logger, cfg.Bind, cfg.HTTPPort, srv, tc)
	if err != nil {
		srv.Shutdown()
		return err
	}
	defer reloadOnSIGHUP(logger, tc)()
	return waitForSignalOrStop(logger, thenStop(stopHTTP, srv.Leave), thenStop(stopHTTP, srv.Shutdown), srv.Halted(), srv.HaltError)
}

// fileExists reports whether path names an existing file.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// warnInsecure logs warning (if not empty) now and, for a process open
// off loopback, every config.InsecureWarningInterval until the returned
// function is called.
func warnInsecure(logger hclog.Logger, warning string) (stop func()) {
	if warning == "" {
		return func() {}
	}
	logger.Warn(warning)
	if !strings.HasPrefix(warning, "INSECURE") {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(config.InsecureWarningInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				logger.Warn(warning)
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// processConfig is a process configuration of package config.
type processConfig interface{ Validate() error }

// loadConfig parses a process's flags (registered on fs, writing into cfg)
// and its -config file, which the flags override, then validates the
// result. The process takes no positional arguments.
func loadConfig(fs *flag.FlagSet, cfg processConfig, args []string, name string) error {
	var configFile string
	fs.StringVar(&configFile, "config", "", "HCL or JSON config `FILE`; flags given as well override it")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("weft %s takes no arguments, got %q", name, pos[0])
	}
	if configFile != "" {
		src, err := os.ReadFile(configFile)
		if err != nil {
			return fmt.Errorf("read config: %w", err)
		}
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if err := config.MergeFile(cfg, configFile, src, set); err != nil {
			return usagef("%v", err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// waitForSignal blocks until SIGINT or SIGTERM, then runs graceful; a second
// signal during it runs hard.
func waitForSignal(logger hclog.Logger, graceful, hard func() error) error {
	return waitForSignalOrStop(logger, graceful, hard, nil, nil)
}

// waitForSignalOrStop is waitForSignal for a process that may also stop by
// itself: when stopped is closed first, it runs hard (which waits for the
// stop to finish) and returns why().
func waitForSignalOrStop(logger hclog.Logger, graceful, hard func() error, stopped <-chan struct{}, why func() error) error {
	sigCh := make(chan os.Signal, 2)
	signal.Notify(sigCh, syscall.SIGINT, syscall.SIGTERM)
	var sig os.Signal
	select {
	case sig = <-sigCh:
	case <-stopped:
		hard()
		return why()
	}
	logger.Info("caught signal; leaving gracefully (signal again to stop at once)", "signal", sig.String())
	done := make(chan error, 1)
	go func() { done <- graceful() }()
	select {
	case err := <-done:
		return err
	case <-sigCh:
		logger.Warn("second signal; stopping without a graceful leave")
		return hard()
	}
}
