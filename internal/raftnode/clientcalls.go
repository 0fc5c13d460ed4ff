package raftnode

import (
	"context"
	"net"
	"time"

	"github.com/weft-sched/weft/internal/inflight"
	wrpc "github.com/weft-sched/weft/rpc"
)

// DefaultClientForwards bounds the client calls a member forwards to the
// leader at once: in all, and from one client address. Each holds a stream
// to the leader until it answers (a consistent read after the leader's
// quorum check, a write once its entry applies, a blocking read that
// arrived while this member was not fresh once it is answered), on
// connections of their own (Config.ClientPool): a flood of client calls is
// answered rate_limited past these bounds, and never takes what agents'
// heartbeats and the members' own calls to the leader need.
var DefaultClientForwards = inflight.Limits{Total: 256, PerKey: 64}

// clientForwardLimits fills the zero fields of l from DefaultClientForwards.
func clientForwardLimits(l inflight.Limits) inflight.Limits {
	if l.Total <= 0 {
		l.Total = DefaultClientForwards.Total
	}
	if l.PerKey <= 0 {
		l.PerKey = DefaultClientForwards.PerKey
	}
	return l
}

type clientCallKey struct{}

// ClientCall marks ctx as a client's call, unless it comes from a server,
// an agent or a router of the cluster (its certificate says so, with TLS
// on) or is to a method only they may call (c), or was made in process
// with no connection. A client's call that this member forwards to the
// leader is bounded by Config.ClientForwards, counted by the caller's
// address, and goes over Config.ClientPool. The process's authorizer marks
// every call it sees.
func ClientCall(ctx context.Context, c wrpc.Capability) context.Context {
	switch c {
	case wrpc.CapAgent, wrpc.CapServer, wrpc.CapFederation:
		return ctx
	}
	ci := wrpc.ConnInfoFrom(ctx)
	if ci == nil {
		return ctx
	}
	if ci.TLS && !ci.HTTP {
		switch ci.Role {
		case wrpc.RoleServer, wrpc.RoleAgent, wrpc.RoleRouter:
			return ctx
		}
	}
	return context.WithValue(ctx, clientCallKey{}, ClientAddress(ci))
}

// ClientOf returns the address of a client's call (ClientCall), and
// whether ctx is one.
func ClientOf(ctx context.Context) (string, bool) {
	addr, ok := ctx.Value(clientCallKey{}).(string)
	return addr, ok
}

// ClientAddress is the address a caller's limits are counted by: the IP it
// connects from (every connection and every port of one host are one
// caller), or "" when it is not known.
func ClientAddress(ci *wrpc.ConnInfo) string {
	if ci == nil || ci.RemoteAddr == nil {
		return ""
	}
	if a, ok := ci.RemoteAddr.(*net.TCPAddr); ok {
		return a.IP.String()
	}
	if host, _, err := net.SplitHostPort(ci.RemoteAddr.String()); err == nil {
		return host
	}
	return ci.RemoteAddr.String()
}

// CallLeader makes one call to the leader this member knows, with no
// hold and no retry: ErrNoLeader when it knows none or leads itself. A
// client's call (ClientCall) is bounded as forwarded ones are.
func (n *Node) CallLeader(ctx context.Context, method string, args, reply any) error {
	addr, _ := n.raft.LeaderWithID()
	if addr == "" || string(addr) == n.addr {
		return wrpc.ErrNoLeader
	}
	pool := n.cfg.Pool
	if client, ok := ClientOf(ctx); ok {
		if !n.clientForwards.Acquire(client) {
			return n.refuseForward(method, client)
		}
		defer n.clientForwards.Release(client)
		pool = n.cfg.ClientPool
	}
	return pool.Call(ctx, string(addr), method, args, reply)
}

// ClientForwards returns the count of client calls being forwarded.
func (n *Node) ClientForwards() *inflight.Counter { return n.clientForwards }

// refusalLogEvery spaces the warnings about refused client calls.
const refusalLogEvery = 10 * time.Second

// refuseForward answers a client's call that would take the forwarded
// calls past their bounds, and says so in the log at most every
// refusalLogEvery.
func (n *Node) refuseForward(method, client string) error {
	if now := time.Now().UnixNano(); now-n.lastRefusalLog.Load() >= int64(refusalLogEvery) {
		n.lastRefusalLog.Store(now)
		total, ofClient := n.clientForwards.InFlight(client)
		limits := n.clientForwards.Limits()
		n.logger.Warn("refusing client calls to the leader past the forwarding limit (further refusals logged at most every 10s)",
			"method", method, "client", client, "forwarding", total, "of_client", ofClient, "limit", limits.Total, "limit_per_client", limits.PerKey)
	}
	return wrpc.Errorf(wrpc.CodeRateLimited, "%s: %w: this server forwards at most %d client calls to the leader at once, %d from one address; retry shortly",
		method, wrpc.ErrRateLimited, n.clientForwards.Limits().Total, n.clientForwards.Limits().PerKey)
}
