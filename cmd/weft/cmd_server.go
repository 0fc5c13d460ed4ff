package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/cmd/weft/internal/hclconf"
	"github.com/weft-sched/weft/server"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error {
	*s = append(*s, v)
	return nil
}

func newLogger(level string) (hclog.Logger, error) {
	lvl := hclog.LevelFromString(level)
	if lvl == hclog.NoLevel {
		return nil, usagef("-log-level %q: use trace, debug, info, warn or error", level)
	}
	return hclog.New(&hclog.LoggerOptions{Name: "weft", Level: lvl, Output: stderr}), nil
}

func runServer(args []string) error {
	fs := newFlagSet("server")
	var (
		nodeID, dataDir, bind, configFile, logLevel string
		rpcPort, serfPort, httpPort, expect         int
		join                                        stringList
	)
	fs.StringVar(&nodeID, "node-id", "", "`ID` of this server (default: the hostname)")
	fs.StringVar(&dataDir, "data-dir", "", "`DIR` for the Raft log, snapshots and serf state (required)")
	fs.StringVar(&bind, "bind", "127.0.0.1", "`IP` to listen on and advertise")
	fs.IntVar(&rpcPort, "rpc-port", server.DefaultRPCPort, "`PORT` for msgpack RPC and Raft")
	fs.IntVar(&serfPort, "serf-port", server.DefaultSerfPort, "`PORT` for serf gossip (TCP and UDP)")
	fs.IntVar(&httpPort, "http-port", 8088, "`PORT` for the HTTP API (reserved; not served yet)")
	fs.IntVar(&expect, "bootstrap-expect", 0, "bootstrap Raft once `N` servers (with the same value) see each other")
	fs.Var(&join, "join", "serf `ADDR` of any cluster member to join (repeatable)")
	fs.StringVar(&configFile, "config", "", "HCL or JSON config `FILE`; flags override it")
	fs.StringVar(&logLevel, "log-level", "info", "log `LEVEL`: trace, debug, info, warn, error")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("weft server takes no arguments, got %q", pos[0])
	}
	if configFile != "" {
		src, err := os.ReadFile(configFile)
		if err != nil {
			return fmt.Errorf("read config: %w", err)
		}
		file, err := hclconf.ParseServerFile(configFile, src)
		if err != nil {
			return err
		}
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		pick := func(name string, flagVal *string, fileVal string) {
			if !set[name] && fileVal != "" {
				*flagVal = fileVal
			}
		}
		pickInt := func(name string, flagVal *int, fileVal int) {
			if !set[name] && fileVal != 0 {
				*flagVal = fileVal
			}
		}
		pick("node-id", &nodeID, file.NodeID)
		pick("data-dir", &dataDir, file.DataDir)
		pick("bind", &bind, file.Bind)
		pick("log-level", &logLevel, file.LogLevel)
		pickInt("rpc-port", &rpcPort, file.RPCPort)
		pickInt("serf-port", &serfPort, file.SerfPort)
		pickInt("http-port", &httpPort, file.HTTPPort)
		pickInt("bootstrap-expect", &expect, file.BootstrapExpect)
		if !set["join"] {
			join = file.Join
		}
	}
	if dataDir == "" {
		return usagef("weft server needs -data-dir DIR: where it keeps its Raft log and snapshots")
	}
	logger, err := newLogger(logLevel)
	if err != nil {
		return err
	}
	srv, err := server.New(&server.Config{
		NodeID:          nodeID,
		DataDir:         dataDir,
		BindAddr:        bind,
		RPCPort:         rpcPort,
		SerfPort:        serfPort,
		BootstrapExpect: expect,
		Join:            join,
		Build:           version,
		Logger:          logger,
	})
	if err != nil {
		return err
	}
	return waitForSignal(logger, srv.Leave, srv.Shutdown)
}

// waitForSignal blocks until SIGINT or SIGTERM, then runs graceful; a second
// signal during it runs hard.
func waitForSignal(logger hclog.Logger, graceful, hard func() error) error {
	sigCh := make(chan os.Signal, 2)
	signal.Notify(sigCh, syscall.SIGINT, syscall.SIGTERM)
	sig := <-sigCh
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
