package main

import (
	"fmt"
	"net"
	"net/http"
	"strconv"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/agent"
	"github.com/weft-sched/weft/httpapi"
	"github.com/weft-sched/weft/internal/metrics"
	"github.com/weft-sched/weft/internal/tlsutil"
	"github.com/weft-sched/weft/server"
	"github.com/weft-sched/weft/ui"
)

// noHTTP is the closer of an HTTP API that is off (http_port 0).
func noHTTP() error { return nil }

// serveServerHTTP serves a server's HTTP API (SPEC §16) on bind:port,
// HTTPS with the server's certificate when tc is set. Port 0 turns it
// off; -1 picks a free port. It returns the URL ("" when off) and how to
// stop it. The metrics and web UI handlers are given here (Config.Metrics,
// Config.UI), so that httpapi imports neither.
func serveServerHTTP(logger hclog.Logger, bind string, port int, srv *server.Server, tc *tlsutil.Configurator) (string, func() error, error) {
	h := httpapi.New(httpapi.Config{RPC: srv, Authenticate: srv.Authenticate, Logger: logger.Named("http"), Metrics: metrics.Handler(), UI: ui.Handler()})
	return listenHTTP(logger, bind, port, h, tc)
}

// serveAgentHTTP serves an agent's HTTP API (health, metrics, container
// logs) as serveServerHTTP does a server's.
func serveAgentHTTP(logger hclog.Logger, bind string, port int, a *agent.Agent, tc *tlsutil.Configurator) (string, func() error, error) {
	h := httpapi.NewAgent(httpapi.AgentConfig{Servers: httpapi.CallerFunc(a.CallServers), NodeID: a.NodeID(), Logger: logger.Named("http"), Metrics: metrics.Handler()})
	return listenHTTP(logger, bind, port, h, tc)
}

func listenHTTP(logger hclog.Logger, bind string, port int, h http.Handler, tc *tlsutil.Configurator) (string, func() error, error) {
	if port == 0 {
		return "", noHTTP, nil
	}
	if port < 0 {
		port = 0
	}
	l, err := httpapi.Listen(net.JoinHostPort(bind, strconv.Itoa(port)), h, tc, httpapi.Limits{}, logger.Named("http"))
	if err != nil {
		return "", nil, fmt.Errorf("%w (set http_port / -http-port to another port, or 0 to turn HTTP off)", err)
	}
	logger.Info("HTTP API listening", "url", l.URL())
	return l.URL(), l.Close, nil
}

// thenStop runs first (stopping the HTTP API) and then stop.
func thenStop(first, stop func() error) func() error {
	return func() error {
		first()
		return stop()
	}
}
