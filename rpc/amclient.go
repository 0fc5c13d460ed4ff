package rpc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/weft-sched/weft/internal/tlsutil"
)

// Environment variables an AM container is started with (SPEC §8), and
// every container (SPEC §12).
const (
	EnvAppID      = "WEFT_APP_ID"
	EnvAppAttempt = "WEFT_APP_ATTEMPT"
	EnvAMRMAddr   = "WEFT_AMRM_ADDR"
	// EnvAgentAddr is the RPC address of the container's own agent, which
	// relays its calls to other agents.
	EnvAgentAddr     = "WEFT_AGENT_ADDR"
	EnvContainerID   = "WEFT_CONTAINER_ID"
	EnvNodeID        = "WEFT_NODE_ID"
	EnvExecutionType = "WEFT_EXECUTION_TYPE"
	// EnvTaskIndex is set by the dshell AM: which of its num_containers
	// tasks a container runs (0-based; a re-run keeps its task's index).
	EnvTaskIndex = "WEFT_TASK_INDEX"
	// EnvCACert and EnvRegion are set in every container by an agent with
	// TLS on: the CA file that verifies agents' certificates and their
	// region. An AM (or a reduce task) dials agents over TLS with them,
	// without a certificate of its own (SPEC §15). EnvCACert is also the
	// CLI's variable for the same file.
	EnvCACert = "WEFT_CACERT"
	EnvRegion = "WEFT_REGION"
	// EnvSecretsDir names the directory of a container's secrets (files
	// only its account may read: LaunchSpec.Secrets). Tokens never travel
	// in the environment, which /proc shows to whoever may trace the
	// process.
	EnvSecretsDir = "WEFT_SECRETS_DIR"
)

// SecretAMToken is the secret that holds an AM token: an AM's own, and the
// one it hands its reduce tasks.
const SecretAMToken = "am-token"

// AMTokenFromEnv reads the AM token from the container's secrets.
func AMTokenFromEnv() (string, error) {
	dir := os.Getenv(EnvSecretsDir)
	if dir == "" {
		return "", fmt.Errorf("no AM token: %s is not set (is this running in a weft container that was given one?)", EnvSecretsDir)
	}
	b, err := os.ReadFile(filepath.Join(dir, SecretAMToken))
	if err != nil {
		return "", fmt.Errorf("no AM token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// AMClient is the client side of the AM protocol (to the AMRMProxy on the
// AM's node) and of the container-management protocol (to the nodes its
// containers are on). Frameworks write their own AMs with it. It remembers
// the index of the last Allocate answer, so each Allocate returns only what
// is new. It is not safe for concurrent use.
type AMClient struct {
	AppID   string
	Attempt int
	Token   string
	// Via, if set, is the RPC address of this node's agent: container
	// calls for other nodes go to it, and it relays them. An agent with
	// TLS on serves callers without a certificate only from its own host
	// (and checks which app's account is calling), so a container reaches
	// other nodes through its own agent.
	Via string

	amrm  *Client
	nodes *Pool
	index uint64
}

// NewAMClient returns a client for the given app attempt whose AMRMProxy is
// at amrmAddr.
func NewAMClient(appID string, attempt int, token, amrmAddr string) *AMClient {
	return NewAMClientTLS(appID, attempt, token, amrmAddr, nil)
}

// NewAMClientTLS is NewAMClient for a cluster with TLS on: it reaches the
// AMRMProxy and the other agents over TLS verified with tc, which must
// hold their CA (a certificate of its own is optional). With tc nil it is
// NewAMClient.
func NewAMClientTLS(appID string, attempt int, token, amrmAddr string, tc *tlsutil.Configurator) *AMClient {
	nodes := NewTLSPool(nil, tc, RoleAgent)
	amrm := NewClient([]string{amrmAddr}, nodes)
	amrm.RetryBudget = time.Minute // ride out a server failover behind the proxy
	c := &AMClient{AppID: appID, Attempt: attempt, Token: token, amrm: amrm, nodes: nodes}
	if tc != nil {
		c.Via = amrmAddr
	}
	return c
}

// route returns where a call for the agent at addr goes, and the node the
// request must name for the agent there to relay it ("" to call addr
// itself).
func (c *AMClient) route(addr string) (to, node string) {
	if c.Via == "" || addr == c.Via {
		return addr, ""
	}
	return c.Via, addr
}

// NewAMClientFromEnv builds a client from the environment an AM container
// is started with; with EnvCACert set it speaks TLS to the agents.
func NewAMClientFromEnv() (*AMClient, error) {
	id, addr := os.Getenv(EnvAppID), os.Getenv(EnvAMRMAddr)
	attempt, err := strconv.Atoi(os.Getenv(EnvAppAttempt))
	if id == "" || addr == "" || err != nil {
		return nil, fmt.Errorf("not running as an AM: %s, %s and %s must be set", EnvAppID, EnvAppAttempt, EnvAMRMAddr)
	}
	var tc *tlsutil.Configurator
	if ca := os.Getenv(EnvCACert); ca != "" {
		if tc, err = tlsutil.New(ca, "", "", os.Getenv(EnvRegion)); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvCACert, err)
		}
	}
	token, err := AMTokenFromEnv()
	if err != nil {
		return nil, err
	}
	return NewAMClientTLS(id, attempt, token, addr, tc), nil
}

// Register registers the attempt and returns the app's spec.
func (c *AMClient) Register(ctx context.Context) (*AMRegisterResponse, error) {
	var resp AMRegisterResponse
	err := c.amrm.Call(ctx, "AM.Register", &AMRegisterRequest{AppID: c.AppID, Attempt: c.Attempt, Token: c.Token}, &resp)
	return &resp, err
}

// Allocate sends asks, releases and promotions and returns what was
// allocated or completed since the previous call, waiting up to maxWait
// for something to happen.
func (c *AMClient) Allocate(ctx context.Context, req AMAllocateRequest, maxWait time.Duration) (*AMAllocateResponse, error) {
	req.AppID, req.Attempt, req.Token = c.AppID, c.Attempt, c.Token
	req.MinQueryIndex = c.index
	req.MaxWait = maxWait
	var resp AMAllocateResponse
	if err := c.amrm.Call(ctx, "AM.Allocate", &req, &resp); err != nil {
		return nil, err
	}
	if resp.Index > c.index {
		c.index = resp.Index
	}
	if resp.AMToken != "" {
		c.Token = resp.AMToken
	}
	return &resp, nil
}

// Finish ends the app as FINISHED or FAILED.
func (c *AMClient) Finish(ctx context.Context, finalState, diagnostics string) error {
	return c.FinishWith(ctx, AMFinishRequest{FinalState: finalState, Diagnostics: diagnostics})
}

// FinishWith ends the app as req says: its final state, diagnostics and
// final counters (SPEC §19). The client fills in the app, attempt and
// token.
func (c *AMClient) FinishWith(ctx context.Context, req AMFinishRequest) error {
	req.AppID, req.Attempt, req.Token = c.AppID, c.Attempt, c.Token
	var resp WriteResponse
	return c.amrm.Call(ctx, "AM.Finish", &req, &resp)
}

// StartContainer asks the container's node to run launch in it.
func (c *AMClient) StartContainer(ctx context.Context, ci ContainerInfo, launch LaunchSpec) (*ContainerStartResponse, error) {
	var resp ContainerStartResponse
	to, _ := c.route(ci.NodeAddress) // the container names its node
	err := c.nodes.Call(ctx, to, "Container.Start", &ContainerStartRequest{Token: ci.Token, Container: ci, Launch: launch, AMToken: c.Token}, &resp)
	return &resp, err
}

// StopContainer asks the container's node to stop it.
func (c *AMClient) StopContainer(ctx context.Context, ci ContainerInfo) error {
	to, node := c.route(ci.NodeAddress)
	return c.nodes.Call(ctx, to, "Container.Stop", &ContainerIDRequest{ID: ci.ID, Token: c.Token, Node: node}, &struct{}{})
}

// ContainerLogs reads one of the app's containers' output on its node.
func (c *AMClient) ContainerLogs(ctx context.Context, ci ContainerInfo, req ContainerLogsRequest) (*ContainerLogsResponse, error) {
	var to string
	to, req.Node = c.route(ci.NodeAddress)
	req.ID, req.Token = ci.ID, c.Token
	var resp ContainerLogsResponse
	err := c.nodes.Call(ctx, to, "Container.Logs", &req, &resp)
	return &resp, err
}

// ContainerOutput reads a file one of the app's completed containers left
// in its work directory, on the container's node.
func (c *AMClient) ContainerOutput(ctx context.Context, ci ContainerInfo, req ContainerOutputRequest) (*ContainerOutputResponse, error) {
	var to string
	to, req.Node = c.route(ci.NodeAddress)
	req.ID, req.Token = ci.ID, c.Token
	var resp ContainerOutputResponse
	err := c.nodes.Call(ctx, to, "Container.Output", &req, &resp)
	return &resp, err
}

// Close releases the client's connections.
func (c *AMClient) Close() { c.nodes.Shutdown() }
