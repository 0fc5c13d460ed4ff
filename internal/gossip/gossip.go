package gossip

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"
)

// Serf tags every member carries (SPEC §3).
const (
	TagRole    = "role"
	TagRPCAddr = "rpc_addr"
	TagID      = "id"
	TagExpect  = "expect"
	TagRack    = "rack"
	TagBuild   = "build"

	RoleServer = "server"
	RoleAgent  = "agent"
	RoleRouter = "router"
)

// Config describes one member of the pool.
type Config struct {
	NodeID   string
	BindAddr string
	Port     int // 0 picks a free port
	DataDir  string
	Tags     map[string]string
	// Fast shortens gossip intervals (tests, weft dev).
	Fast bool
	// Encrypt is the gossip key given at start (base64 of KeySize bytes),
	// or "" for none. A keyring file in DataDir wins over it (openKeyring).
	Encrypt string
	Logger  hclog.Logger
	EventCh chan serf.Event
}

// Create starts a member: it opens the keyring, binds the guarded gossip
// transport and starts serf. With a key, every packet and stream must be
// encrypted and authenticated with a key of the keyring before anything in
// it is decoded; without, the guard bounds what memberlist decodes. Either
// way serf's key queries are refused (guard.go): the member's keyring, which
// Create returns, changes only through Keyring.Apply.
func Create(c Config) (*serf.Serf, *Keyring, error) {
	conf, err := serfConfig(c)
	if err != nil {
		return nil, nil, err
	}
	ml := conf.MemberlistConfig
	keyring := &Keyring{ring: ml.Keyring}
	if ml.Keyring != nil && c.DataDir != "" {
		keyring.file = KeyringFile(c.DataDir)
	}
	t, err := newGuard(ml.BindAddr, ml.BindPort, ml.Keyring, c.Logger.Named("guard"))
	if err != nil {
		return nil, nil, err
	}
	if ml.BindPort == 0 {
		ml.BindPort = t.GetAutoBindPort()
		ml.AdvertisePort = ml.BindPort
	}
	ml.Transport = t
	s, err := serf.Create(conf)
	if err != nil {
		t.Shutdown()
		return nil, nil, fmt.Errorf("start serf: %w", err)
	}
	return s, keyring, nil
}

// serfConfig builds the serf configuration for a member, without a
// transport.
func serfConfig(c Config) (*serf.Config, error) {
	conf := serf.DefaultConfig()
	conf.Init()
	conf.NodeName = c.NodeID
	conf.Tags = c.Tags
	conf.EventCh = c.EventCh
	conf.RejoinAfterLeave = true
	std := c.Logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	conf.Logger = std
	ml := memberlist.DefaultLANConfig()
	ml.Name = c.NodeID
	ml.BindAddr = c.BindAddr
	ml.BindPort = c.Port
	ml.AdvertiseAddr = c.BindAddr
	ml.AdvertisePort = c.Port
	ml.Logger = std
	if c.Fast {
		ml.GossipInterval = 50 * time.Millisecond
		ml.ProbeInterval = 500 * time.Millisecond
		ml.ProbeTimeout = 250 * time.Millisecond
		ml.SuspicionMult = 2
		conf.ReapInterval = time.Second
	}
	// weft members never compress, so the guard can refuse every
	// compressed message: what one decompresses to is unbounded.
	ml.EnableCompression = false
	conf.MemberlistConfig = ml
	if c.DataDir != "" {
		dir := filepath.Join(c.DataDir, "serf")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create serf dir: %w", err)
		}
		conf.SnapshotPath = filepath.Join(dir, "local.snapshot")
		// No conf.KeyringFile: serf writes it only when it answers a key
		// query, which the guard refuses; Keyring.Apply writes it.
	}
	keyring, err := openKeyring(c)
	if err != nil {
		return nil, err
	}
	if keyring != nil {
		ml.Keyring = keyring
		// Send only encrypted messages, and drop any that is not
		// encrypted with a key of the keyring before decoding it.
		ml.GossipVerifyIncoming = true
		ml.GossipVerifyOutgoing = true
	}
	return conf, nil
}

// Addr returns the address a member gossips on.
func Addr(s *serf.Serf) string {
	n := s.Memberlist().LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// Default serf ports of servers and agents (SPEC §2).
const (
	ServerSerfPort = 8031
	AgentSerfPort  = 8041
)

// JoinAddrs expands join addresses: one with a port is used as it is; a
// bare host is tried at both the server's and the agent's default serf
// port, so "-join HOST" reaches whichever kind of member runs there.
func JoinAddrs(addrs []string) []string {
	var out []string
	for _, a := range addrs {
		if _, _, err := net.SplitHostPort(a); err == nil {
			out = append(out, a)
			continue
		}
		host := strings.TrimSuffix(strings.TrimPrefix(a, "["), "]")
		out = append(out, net.JoinHostPort(host, strconv.Itoa(ServerSerfPort)), net.JoinHostPort(host, strconv.Itoa(AgentSerfPort)))
	}
	return out
}

// JoinLoop joins the given addresses, retrying every interval until one
// join succeeds or stop is closed.
func JoinLoop(s *serf.Serf, addrs []string, interval time.Duration, logger hclog.Logger, stop <-chan struct{}) {
	full := JoinAddrs(addrs)
	for {
		n, err := s.Join(full, true)
		if n > 0 {
			logger.Info("joined the pool", "contacted", n)
			return
		}
		logger.Warn("join failed; retrying", "addresses", full, "error", err)
		select {
		case <-time.After(interval):
		case <-stop:
			return
		}
	}
}

// ServerRPCAddrs returns the RPC addresses of the alive servers in the pool.
func ServerRPCAddrs(s *serf.Serf) []string {
	var out []string
	for _, m := range s.Members() {
		if m.Status == serf.StatusAlive && m.Tags[TagRole] == RoleServer && m.Tags[TagRPCAddr] != "" {
			out = append(out, m.Tags[TagRPCAddr])
		}
	}
	return out
}

// Agent is an alive agent as gossip describes it.
type Agent struct {
	ID      string
	RPCAddr string
	Rack    string
}

// AliveAgents returns the alive agents in the pool.
func AliveAgents(s *serf.Serf) []Agent {
	var out []Agent
	for _, m := range s.Members() {
		if m.Status == serf.StatusAlive && m.Tags[TagRole] == RoleAgent && m.Tags[TagRPCAddr] != "" {
			out = append(out, Agent{ID: m.Tags[TagID], RPCAddr: m.Tags[TagRPCAddr], Rack: m.Tags[TagRack]})
		}
	}
	return out
}
