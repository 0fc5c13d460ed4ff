package config

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/agext/levenshtein"
	"github.com/weft-sched/weft/scheduler"
)

// Agent is the configuration of `weft agent`. Each field is one setting:
// `hcl` names it in a -config file, `flag` on the command line.
type Agent struct {
	NodeID                   string           `hcl:"node_id,optional" flag:"node-id" help:"ID of this node (default: the hostname)"`
	DataDir                  string           `hcl:"data_dir,optional" flag:"data-dir" help:"directory for container directories, logs and serf state (required)"`
	Bind                     string           `hcl:"bind,optional" flag:"bind" help:"IP address to listen on and advertise"`
	RPCPort                  int              `hcl:"rpc_port,optional" flag:"rpc-port" help:"port for the AMRMProxy and container management"`
	SerfPort                 int              `hcl:"serf_port,optional" flag:"serf-port" help:"port for serf gossip"`
	HTTPPort                 int              `hcl:"http_port,optional" flag:"http-port" help:"port for health, metrics and container logs over HTTP (HTTPS when TLS is on); 0 turns it off, -1 picks a free port"`
	Join                     []string         `hcl:"join,optional" flag:"join" help:"serf address of any server or agent (repeatable; at least one)"`
	Resources                map[string]int64 `hcl:"resources,optional" flag:"resources" help:"capacity offered, e.g. memory_mb=8192,vcores=8,gpu=2 (memory_mb and vcores required)"`
	Rack                     string           `hcl:"rack,optional" flag:"rack" help:"rack of this node, for locality"`
	OpportunisticQueueLength int              `hcl:"opportunistic_queue_length,optional" flag:"opportunistic-queue-length" help:"most opportunistic containers that may wait here (0 never queues)"`
	LazyHeartbeats           bool             `hcl:"lazy_heartbeats,optional" flag:"lazy-heartbeats" help:"heartbeat only every second, not also when a container changes state (fewer leader writes, slower feedback)"`
	AllowRoot                bool             `hcl:"allow_root,optional" flag:"allow-root" help:"when the agent runs as root, let containers run as root too (default: as nobody, or their user's account with -run-as-user)"`
	RunAsUser                bool             `hcl:"run_as_user,optional" flag:"run-as-user" help:"when the agent runs as root, run each container as its submitting user's Unix account where that account exists here"`
	LogLevel                 string           `hcl:"log_level,optional" flag:"log-level" help:"log level: trace, debug, info, warn or error"`
	LogJSON                  bool             `hcl:"log_json,optional" flag:"log-json" help:"write logs as JSON objects, one a line"`
	LogRetention             string           `hcl:"log_retention,optional" flag:"log-retention" help:"how long a completed container's directory and logs stay on this node (and at least while its app runs), e.g. 24h or 30m"`
	Region                   string           `hcl:"region,optional" flag:"region" help:"region this agent belongs to; certificates name it (agent.REGION.weft)"`
	Encrypt                  string           `hcl:"encrypt,optional" flag:"encrypt" help:"gossip encryption key (base64 of 32 bytes, from 'weft operator keygen')"`
	Insecure                 bool             `hcl:"insecure,optional" flag:"insecure" help:"run without TLS or a gossip key on a non-loopback address (anyone who reaches it can run commands)"`
	DynamicUIDRange          string           `hcl:"dynamic_uid_range,optional" flag:"dynamic-uid-range" help:"uids this agent runs apps' containers as, the one the servers gave each app (FIRST-LAST, or off: as nobody); the servers' range must lie within it"`
	JoinToken                string           `hcl:"join_token,optional" flag:"join-token" help:"node-join token from 'weft node join-token create': with ACLs on, the servers register a new node only with one (or set WEFT_JOIN_TOKEN; a flag is visible to anyone who can list processes)"`
	JoinTokenFile            string           `hcl:"join_token_file,optional" flag:"join-token-file" help:"file holding a node-join token, read at each registration attempt (so a token written there later is taken up)"`
	TLS                      *TLS             `hcl:"tls,block"`
	Limits                   *Limits          `hcl:"limits,block"`
	// Opportunistic is how this node orders, evicts, pauses and
	// overcommits opportunistic containers (docs/opportunistic.md).
	Opportunistic *AgentOpportunistic `hcl:"opportunistic,block"`
}

// AgentOpportunistic is an agent's opportunistic block.
type AgentOpportunistic struct {
	QueuePolicy  string             `hcl:"queue_policy,optional"`
	MaxQueueWait string             `hcl:"max_queue_wait,optional"`
	Eviction     string             `hcl:"eviction,optional"`
	Pause        bool               `hcl:"pause,optional"`
	MaxPause     string             `hcl:"max_pause,optional"`
	Overcommit   map[string]float64 `hcl:"overcommit,optional"`
}

// LocalPolicy returns the node's opportunistic policy: the defaults (fifo,
// least_waste, no pausing, no overcommit) for what the block leaves out.
func (c *Agent) LocalPolicy() (scheduler.LocalPolicy, error) {
	p := scheduler.LocalPolicy{QueuePolicy: scheduler.QueueFIFO, Eviction: scheduler.EvictLeastWaste, MaxPause: scheduler.DefaultMaxPause}
	o := c.Opportunistic
	if o == nil {
		return p, nil
	}
	if o.QueuePolicy != "" {
		p.QueuePolicy = o.QueuePolicy
	}
	if o.Eviction != "" {
		p.Eviction = o.Eviction
	}
	p.Pause = o.Pause
	for name, s := range map[string]string{"max_queue_wait": o.MaxQueueWait, "max_pause": o.MaxPause} {
		if s == "" {
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return p, fmt.Errorf("opportunistic.%s %q: give a positive duration such as 30s or 5m", name, s)
		}
		if name == "max_queue_wait" {
			p.MaxQueueWait = d
		} else {
			p.MaxPause = d
		}
	}
	for k, f := range o.Overcommit {
		switch k {
		case scheduler.ResourceMemoryMB:
			p.Overcommit.MemoryMB = f
		case scheduler.ResourceVcores:
			p.Overcommit.Vcores = f
		default:
			return p, fmt.Errorf("opportunistic.overcommit: %q cannot be overcommitted; give memory_mb and vcores, fractions of the node's capacity", k)
		}
	}
	return p, p.Validate()
}

// Agent defaults (SPEC §2, §10, §12).
const (
	DefaultRack                     = "/default-rack"
	DefaultOpportunisticQueueLength = 10
	DefaultLogRetention             = 24 * time.Hour
)

// DefaultAgentResources is what an agent offers when it is not told.
var DefaultAgentResources = map[string]int64{scheduler.ResourceMemoryMB: 8192, scheduler.ResourceVcores: 8}

// DefaultAgent returns an agent configuration holding the defaults.
func DefaultAgent() *Agent {
	res := map[string]int64{}
	for k, v := range DefaultAgentResources {
		res[k] = v
	}
	return &Agent{Bind: DefaultBind, RPCPort: DefaultAgentRPCPort, SerfPort: DefaultAgentSerfPort, HTTPPort: DefaultAgentHTTPPort, Resources: res,
		Rack: DefaultRack, OpportunisticQueueLength: DefaultOpportunisticQueueLength, LogLevel: DefaultLogLevel, Region: DefaultRegion,
		LogRetention: DefaultLogRetention.String(), DynamicUIDRange: DefaultDynamicUIDRange}
}

// Validate checks every setting and names the first bad one.
func (c *Agent) Validate() error {
	if _, _, err := ParseUIDRange(c.DynamicUIDRange); err != nil {
		return err
	}
	switch {
	case c.DataDir == "":
		return errors.New("data_dir (-data-dir) is required: where the agent keeps container directories and logs")
	case len(c.Join) == 0:
		return errors.New("join (-join) is required: the serf address of any server or agent")
	case c.OpportunisticQueueLength < 0:
		return fmt.Errorf("opportunistic_queue_length (-opportunistic-queue-length) must not be negative, not %d", c.OpportunisticQueueLength)
	case strings.TrimSpace(c.Rack) == "":
		return errors.New("rack (-rack) must not be empty")
	}
	if _, err := c.LogRetentionDuration(); err != nil {
		return err
	}
	if _, err := c.LocalPolicy(); err != nil {
		return err
	}
	if _, err := NodeResources(c.Resources); err != nil {
		return fmt.Errorf("resources (-resources): %v", err)
	}
	if err := validateSecurity(c.Region, c.TLS, c.Limits); err != nil {
		return err
	}
	if err := validateEncrypt(c.Encrypt); err != nil {
		return err
	}
	return validateCommon(c.NodeID, c.Bind, c.LogLevel, map[string]int{"rpc_port": c.RPCPort, "serf_port": c.SerfPort, "http_port": c.HTTPPort}, c.Join)
}

// NodeResources turns a node's declared capacity into a resource vector.
// memory_mb and vcores must be given and positive; any other name is an
// extended resource (gpu, say), refused when it looks like a misspelt
// memory_mb or vcores.
func NodeResources(m map[string]int64) (scheduler.Resources, error) {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	var r scheduler.Resources
	for _, name := range names {
		v := m[name]
		if name != scheduler.ResourceMemoryMB && name != scheduler.ResourceVcores {
			if known := likelyMeant(name); known != "" {
				return r, fmt.Errorf("unknown resource %q; did you mean %s?", name, known)
			}
			if err := scheduler.ValidateResourceName(name); err != nil {
				return r, err
			}
		}
		if v < 0 {
			return r, fmt.Errorf("%s must not be negative (got %d)", name, v)
		}
		r = r.With(name, v)
	}
	for _, need := range []string{scheduler.ResourceMemoryMB, scheduler.ResourceVcores} {
		if v, ok := m[need]; !ok || v <= 0 {
			return r, fmt.Errorf("%s must be given and positive (got %s)", need, formatResources(m))
		}
	}
	return r, nil
}

// resourceAliases are names people write for memory_mb and vcores.
var resourceAliases = map[string]string{
	"mem": scheduler.ResourceMemoryMB, "memory": scheduler.ResourceMemoryMB, "ram": scheduler.ResourceMemoryMB,
	"memory_gb": scheduler.ResourceMemoryMB, "mem_mb": scheduler.ResourceMemoryMB, "memorymb": scheduler.ResourceMemoryMB,
	"cpu": scheduler.ResourceVcores, "cpus": scheduler.ResourceVcores, "cores": scheduler.ResourceVcores,
	"vcore": scheduler.ResourceVcores, "vcpu": scheduler.ResourceVcores, "vcpus": scheduler.ResourceVcores,
}

// likelyMeant returns memory_mb or vcores when name looks like a misspelling
// of one of them, else "".
func likelyMeant(name string) string {
	lower := strings.ToLower(name)
	if known, ok := resourceAliases[lower]; ok {
		return known
	}
	for _, known := range []string{scheduler.ResourceMemoryMB, scheduler.ResourceVcores} {
		if levenshtein.Distance(lower, known, nil) <= 2 {
			return known
		}
	}
	return ""
}

func formatResources(m map[string]int64) string {
	if len(m) == 0 {
		return "nothing"
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, ",")
}

// LogRetentionDuration is log_retention as a duration: how long a completed
// container's directory stays on the node. It must be positive.
func (c *Agent) LogRetentionDuration() (time.Duration, error) {
	d, err := time.ParseDuration(c.LogRetention)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("log_retention (-log-retention) %q: give a positive duration such as 24h or 90m", c.LogRetention)
	}
	return d, nil
}
