package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/weft-sched/weft/agent"
	"github.com/weft-sched/weft/internal/config"
	"github.com/weft-sched/weft/internal/metrics"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/server"
)

func runDev(args []string) error {
	fs := newFlagSet("dev")
	var bind, logLevel, resources string
	var rpcPort, serfPort, httpPort, agents, racks int
	var insecure, logJSON bool
	fs.StringVar(&bind, "bind", "127.0.0.1", "`IP` to listen on")
	fs.IntVar(&rpcPort, "rpc-port", server.DefaultRPCPort, "`PORT` for the server's RPC")
	fs.IntVar(&serfPort, "serf-port", server.DefaultSerfPort, "`PORT` for the server's serf gossip")
	fs.IntVar(&httpPort, "http-port", config.DefaultServerHTTPPort, "`PORT` for the server's HTTP API and web UI (0: off)")
	fs.IntVar(&agents, "agents", 3, "how many agents (`N`) run beside the server")
	fs.IntVar(&racks, "racks", 1, "spread the agents over `N` racks, /rack-1 to /rack-N, round robin")
	fs.StringVar(&resources, "resources", "memory_mb=4096,vcores=4", "capacity of each agent")
	fs.StringVar(&logLevel, "log-level", "warn", "log `LEVEL`")
	fs.BoolVar(&logJSON, "log-json", false, "write logs as JSON objects, one a line")
	fs.BoolVar(&insecure, "insecure", false, "allow -bind off loopback: the dev cluster has no TLS, gossip key or ACLs")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("weft dev takes no arguments, got %q", pos[0])
	}
	if racks < 1 || racks > 64 {
		return usagef("-racks: must be between 1 and 64, not %d", racks)
	}
	if agents < 0 || agents > 64 {
		return usagef("-agents must be between 0 and 64")
	}
	res, err := scheduler.ParseResources(resources)
	if err != nil {
		return usagef("-resources: %v", err)
	}
	warning, err := config.CheckSecure("dev cluster", bind, []string{"TLS", "a gossip key", "ACLs"}, insecure)
	if err != nil {
		return usagef("%v", err)
	}
	logger, err := newLogger(logLevel, logJSON)
	if err != nil {
		return err
	}
	stopWarning := warnInsecure(logger, warning)
	defer stopWarning()
	dir, err := os.MkdirTemp("", "weft-dev-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := metrics.Init(); err != nil {
		return err
	}
	srv, err := server.New(&server.Config{
		NodeID:          "dev-server",
		DataDir:         filepath.Join(dir, "server"),
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
	httpURL, stopHTTP, err := serveServerHTTP(logger, bind, httpPort, srv, nil)
	if err != nil {
		srv.Shutdown()
		return err
	}
	var nodes []*agent.Agent
	stopAll := func() error {
		stopHTTP()
		var wg sync.WaitGroup
		for _, a := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a.Leave()
			}()
		}
		wg.Wait()
		return srv.Shutdown()
	}
	for i := 1; i <= agents; i++ {
		a, err := agent.New(&agent.Config{
			NodeID: fmt.Sprintf("dev-agent-%d", i), DataDir: filepath.Join(dir, fmt.Sprintf("agent-%d", i)), Rack: devRack(i, racks),
			BindAddr: bind, RPCPort: -1, SerfPort: -1, Join: []string{srv.SerfAddr()}, Resources: res,
			OpportunisticQueueLength: -1, SerfFastGossip: true, Build: version, Logger: logger,
			// Containers run as whoever runs weft dev (its data dir is
			// private to that user); the banner says so when that is root.
			AllowRoot: true,
		})
		if err != nil {
			stopAll()
			return err
		}
		nodes = append(nodes, a)
	}
	addr := srv.RPCAddr()
	hint := ""
	if addr != defaultAddress {
		hint = " -address " + addr
	}
	httpLine := "HTTP API: off (-http-port 0)"
	if httpURL != "" {
		httpLine = fmt.Sprintf("HTTP API and web UI: %s (try curl %[1]s/v1/status, or open %[1]s/ui/)", httpURL)
	}
	fmt.Fprintf(stdout, `weft dev is running: one server on %s and %d agents of %s (data in %s, removed on exit).
It is open (no TLS, gossip key or ACLs): anyone who can reach %[1]s can use it.
%[6]s

Try, in another terminal (the binary is bin/weft):
  weft members%[5]s
  weft node list%[5]s
  weft app submit%[5]s -num-containers 4 -wait -- sh -c 'echo hello from $WEFT_CONTAINER_ID'
  weft container list%[5]s
  weft container logs%[5]s CONTAINER_ID
  weft queue apply%[5]s examples/queues.hcl

Stop with Ctrl-C.
`, addr, agents, res, dir, hint, httpLine)
	if os.Geteuid() == 0 {
		fmt.Fprintln(stdout, "\nYou run weft dev as root, so its containers run as root: anyone who can reach "+addr+" runs commands as root here. Run it as an ordinary user.")
	}
	return waitForSignalOrStop(logger, stopAll, stopAll, srv.Halted(), srv.HaltError)
}

// devRack is the rack of dev agent i (1-based) among racks: the agents'
// default rack when there is one rack, else /rack-1 to /rack-N in turn.
func devRack(i, racks int) string {
	if racks == 1 {
		return ""
	}
	return fmt.Sprintf("/rack-%d", (i-1)%racks+1)
}
