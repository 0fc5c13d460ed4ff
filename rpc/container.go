package rpc

import (
	"time"

	"github.com/weft-sched/weft/scheduler"
)

// ContainerInfo is one container as `weft container list -json` shows it
// and as AMs receive allocations.
type ContainerInfo struct {
	ID          string `codec:"id" json:"id"`
	AppID       string `codec:"app_id" json:"app_id"`
	Attempt     int    `codec:"attempt" json:"attempt"`
	NodeID      string `codec:"node_id" json:"node_id"`
	NodeAddress string `codec:"node_address" json:"node_address"`
	// Rack is the node's rack, where the servers know it: an AM measures
	// network distance with it (SPEC §19).
	Rack          string              `codec:"rack,omitempty" json:"rack,omitempty"`
	AskID         uint64              `codec:"ask_id" json:"ask_id"`
	ExecutionType string              `codec:"execution_type" json:"execution_type"`
	State         string              `codec:"state" json:"state"`
	ExitCode      *int                `codec:"exit_code" json:"exit_code"`
	Reason        string              `codec:"reason" json:"reason"`
	Diagnostics   string              `codec:"diagnostics" json:"diagnostics,omitempty"`
	IsAM          bool                `codec:"is_am" json:"is_am"`
	Resources     scheduler.Resources `codec:"resources" json:"resources"`
	// User is the app's user: the Unix account the container runs as when
	// its agent runs as root with run_as_user (SPEC §15). The servers set
	// it on the containers they hand out, AMRMProxies on theirs; the
	// signed container token must cover it, since the starting agent
	// takes it from the request.
	User string `codec:"user" json:"user,omitempty"`
	// UID is the uid the servers gave the container's app: what it runs
	// as on an agent running as root, where its user has no account the
	// agent may use. The starting agent takes it from a token the servers
	// signed, never from the request.
	UID uint32 `codec:"uid,omitempty" json:"uid,omitempty"`
	// Token is the container token that authorises starting the
	// container on its node, exactly as allocated (SPEC §15). Only the
	// allocation's AM receives it, in AM.Allocate answers; listings never
	// carry it.
	Token string `codec:"token" json:"-"`
	// ExpectedDuration is how long its ask said it runs, and Progress how
	// far its app was when it was allocated (0 to 1): hints a node's
	// opportunistic queue may order by (shortest_first,
	// nearest_completion). They are the AM's word, as the ask was.
	ExpectedDuration time.Duration `codec:"expected_duration,omitempty" json:"expected_duration_ns,omitempty"`
	Progress         float32       `codec:"progress,omitempty" json:"progress,omitempty"`
	AllocatedAt      int64         `codec:"allocated_at" json:"allocated_at"`
	StartedAt        int64         `codec:"started_at" json:"started_at,omitempty"`
	FinishedAt       int64         `codec:"finished_at" json:"finished_at,omitempty"`
}

// NewContainerInfo describes a container on node n (its RPC address and
// rack; nil when the node is not known, which leaves both empty). It
// carries no token.
func NewContainerInfo(c *scheduler.Container, n *scheduler.Node) ContainerInfo {
	info := ContainerInfo{
		ID: c.ID, AppID: c.AppID, Attempt: c.Attempt, NodeID: c.NodeID, AskID: c.AskID,
		ExecutionType: string(c.ExecutionType), State: string(c.State), ExitCode: c.ExitCode,
		Reason: string(c.Reason), Diagnostics: c.Diagnostics, IsAM: c.IsAM, Resources: c.Resources,
		AllocatedAt: c.AllocatedAt, StartedAt: c.StartedAt, FinishedAt: c.FinishedAt,
	}
	if n != nil {
		info.NodeAddress, info.Rack = n.Address, n.Rack
	}
	return info
}

// ContainerListRequest lists containers by app, node and/or state
// (Container.List on servers), in numeric ID order.
type ContainerListRequest struct {
	RequestHeader
	AppID  string `codec:"app_id" json:"app_id"`
	NodeID string `codec:"node_id" json:"node_id"`
	State  string `codec:"state" json:"state"`
}

// ContainerListResponse answers Container.List.
type ContainerListResponse struct {
	ResponseMeta `codec:"meta" json:"-"`
	Containers   []ContainerInfo `codec:"containers" json:"containers"`
	// Unreachable names the sub-clusters a router could not list, each
	// with why: a federation's answer.
	Unreachable []string `codec:"unreachable,omitempty" json:"unreachable,omitempty"`
}

// LaunchSpec is what to run in a container.
type LaunchSpec struct {
	Command []string          `codec:"command"`
	Env     map[string]string `codec:"env"`
	// Secrets are credentials the container needs (an AM hands its AM
	// token to a reduce task as SecretAMToken): its agent writes each to a
	// file in the directory EnvSecretsDir names, readable only by the
	// container's account, never into its environment. At most 16, named
	// [a-z0-9][a-z0-9._-]*, of at most 16 KiB each.
	Secrets map[string]string `codec:"secrets,omitempty" json:"-"`
	// WorkingDir is relative to the container's own directory; empty means
	// the container's directory itself.
	WorkingDir string `codec:"working_dir"`
}

// ContainerStartRequest asks an agent to start a container placed on it
// (Container.Start on agents). Token must be a valid container token for
// exactly Container: its ID, app, attempt, node, resources and execution
// type.
type ContainerStartRequest struct {
	RequestHeader
	Token     string        `codec:"token"`
	Container ContainerInfo `codec:"container"`
	Launch    LaunchSpec    `codec:"launch"`
	// AMToken is the app attempt's AM token, needed with a container
	// token an AMRMProxy minted (its node is not trusted with the app's
	// user and uid; the servers signed those in the AM token).
	AMToken string `codec:"am_token,omitempty"`
}

// ContainerStartResponse says what became of the start: RUNNING, QUEUED, or
// COMPLETED with a reason (rejected, failed).
type ContainerStartResponse struct {
	State       string `codec:"state"`
	Reason      string `codec:"reason"`
	Diagnostics string `codec:"diagnostics"`
}

// ContainerIDRequest names a container (Container.Stop and
// Container.Promote on agents). For Stop, Token is the AM token of the
// container's app; for Promote, a container token of it as guaranteed,
// which only the leader mints.
type ContainerIDRequest struct {
	RequestHeader
	ID    string `codec:"id"`
	Token string `codec:"token" json:"-"`
	// Node is the RPC address of the agent the call is for, when it is
	// not the agent called: a container calls only its own node's agent,
	// which relays the call there (with its certificate).
	Node string `codec:"node,omitempty"`
}

// ContainerStatusRequest asks an agent about containers (Container.Status).
// Token is an AM token: only its app's containers are reported.
type ContainerStatusRequest struct {
	RequestHeader
	IDs   []string `codec:"ids"`
	Token string   `codec:"token" json:"-"`
	// Node is the RPC address of the agent the call is for, when it is
	// not the agent called: a container calls only its own node's agent,
	// which relays the call there (with its certificate).
	Node string `codec:"node,omitempty"`
}

// ContainerStatusResponse answers Container.Status.
type ContainerStatusResponse struct {
	Containers []ContainerReport `codec:"containers"`
}

// Log streams.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// MaxLogChunk is the most a single Container.Logs call returns.
const MaxLogChunk = 1 << 20

// ContainerLogsRequest reads a container's output from Offset
// (Container.Logs on agents; on servers it is relayed to the node). On
// agents, Token is the AM token of the container's app or a container
// token of the container (servers mint one to relay a read); servers
// ignore the caller's.
type ContainerLogsRequest struct {
	RequestHeader
	ID     string `codec:"id"`
	Stream string `codec:"stream"`
	Offset int64  `codec:"offset"`
	Limit  int    `codec:"limit"`
	Token  string `codec:"token" json:"-"`
	// Node is the RPC address of the agent the call is for, when it is
	// not the agent called: a container calls only its own node's agent,
	// which relays the call there (with its certificate).
	Node string `codec:"node,omitempty"`
}

// ContainerOutputRequest reads a file a completed container left in its
// work directory (Container.Output on agents): how a reduce task fetches
// its partition of a map's output (SPEC §19). Path is relative to the work
// directory and stays inside it; Token is the AM token of the container's
// app. The directory is kept until log_retention after the container
// completed.
type ContainerOutputRequest struct {
	RequestHeader
	ID     string `codec:"id"`
	Path   string `codec:"path"`
	Offset int64  `codec:"offset"`
	Limit  int    `codec:"limit"`
	Token  string `codec:"token" json:"-"`
	// Node is the RPC address of the agent the call is for, when it is
	// not the agent called: a container calls only its own node's agent,
	// which relays the call there (with its certificate).
	Node string `codec:"node,omitempty"`
}

// MaxOutputPath bounds ContainerOutputRequest.Path.
const MaxOutputPath = 255

// ContainerOutputResponse holds up to Limit bytes (at most MaxLogChunk)
// of the file from Offset, the offset after them and the file's size.
type ContainerOutputResponse struct {
	Data       []byte `codec:"data"`
	NextOffset int64  `codec:"next_offset"`
	Size       int64  `codec:"size"`
}

// ContainerLogsResponse holds up to Limit bytes and the offset after them.
type ContainerLogsResponse struct {
	Data       []byte `codec:"data"`
	NextOffset int64  `codec:"next_offset"`
	// Done is true when the container has completed and NextOffset is the
	// end of the stream.
	Done bool `codec:"done"`
}
