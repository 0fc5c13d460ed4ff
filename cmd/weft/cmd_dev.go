package main

import (
	"fmt"
	"os"

	"github.com/weft-sched/weft/server"
)

func runDev(args []string) error {
	fs := newFlagSet("dev")
	var bind, logLevel string
	var rpcPort, serfPort int
	fs.StringVar(&bind, "bind", "127.0.0.1", "`IP` to listen on")
	fs.IntVar(&rpcPort, "rpc-port", server.DefaultRPCPort, "`PORT` for RPC")
	fs.IntVar(&serfPort, "serf-port", server.DefaultSerfPort, "`PORT` for serf gossip")
	fs.StringVar(&logLevel, "log-level", "warn", "log `LEVEL`")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("weft dev takes no arguments, got %q", pos[0])
	}
	logger, err := newLogger(logLevel)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "weft-dev-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := server.New(&server.Config{
		NodeID:          "dev-server",
		DataDir:         dir,
		BindAddr:        bind,
		RPCPort:         rpcPort,
		SerfPort:        serfPort,
		BootstrapExpect: 1,
		SerfFastGossip:  true,
		Build:           version,
		Logger:          logger,
	})
	if err != nil {
		return err
	}
	addr := srv.RPCAddr()
	hint := ""
	if addr != defaultAddress {
		hint = " -address " + addr
	}
	fmt.Fprintf(stdout, `weft dev is running: one server on %s (data in %s, removed on exit).

Try, in another terminal:
  weft members%[3]s
  weft operator raft list-peers%[3]s
  weft queue list%[3]s
  weft queue apply%[3]s examples/queues.hcl
  weft queue status%[3]s root.prod

Stop with Ctrl-C.
`, addr, dir, hint)
	return waitForSignal(logger, srv.Shutdown, srv.Shutdown)
}
