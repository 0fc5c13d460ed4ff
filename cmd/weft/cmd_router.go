package main

import (
	"github.com/weft-sched/weft/httpapi"
	"github.com/weft-sched/weft/internal/config"
	"github.com/weft-sched/weft/internal/gossip"
	"github.com/weft-sched/weft/internal/metrics"
	"github.com/weft-sched/weft/router"
	"github.com/weft-sched/weft/ui"
)

func runRouter(args []string) error {
	cfg := config.DefaultRouter()
	fs := newFlagSet("router")
	config.RegisterFlags(fs, cfg)
	if err := loadConfig(fs, cfg, args, "router"); err != nil {
		return err
	}
	warning, err := config.CheckSecure("router", cfg.Bind, cfg.SecurityGaps(fileExists(gossip.KeyringFile(cfg.DataDir))), cfg.Insecure)
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
	timeout, gpg, err := cfg.Intervals()
	if err != nil {
		return err
	}
	stopWarning := warnInsecure(logger, warning)
	defer stopWarning()
	r, err := router.New(&router.Config{
		NodeID: cfg.NodeID, DataDir: cfg.DataDir, BindAddr: cfg.Bind, RPCPort: cfg.RPCPort, SerfPort: cfg.SerfPort,
		BootstrapExpect: cfg.BootstrapExpect, Join: cfg.Join, Encrypt: cfg.Encrypt, SubclusterTimeout: timeout,
		GPGInterval: gpg, ACLEnabled: cfg.ACL != nil && cfg.ACL.Enabled, TLS: tc, Limits: rpcLimits(cfg.Limits), Build: version, Logger: logger,
	})
	if err != nil {
		return err
	}
	h := httpapi.New(httpapi.Config{RPC: r, Authenticate: r.Authenticate, Role: "router", Logger: logger.Named("http"), Metrics: metrics.Handler(), UI: ui.Handler()})
	_, stopHTTP, err := listenHTTP(logger, cfg.Bind, cfg.HTTPPort, h, tc)
	if err != nil {
		r.Shutdown()
		return err
	}
	defer reloadOnSIGHUP(logger, tc)()
	return waitForSignal(logger, thenStop(stopHTTP, r.Leave), thenStop(stopHTTP, r.Shutdown))
}
