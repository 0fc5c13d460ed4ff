package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/weft-sched/weft/internal/config"
	"github.com/weft-sched/weft/rpc"
)

// route is one HTTP route: the RPC method it calls and the capability that
// method declares (the caller's ACL token must grant it), the query
// parameters it takes, and whether it is a read (which takes ?stale,
// ?index and ?wait and answers with X-Weft-Index).
type route struct {
	method string
	path   string
	// rpc is the method the route calls; "" for one that calls none.
	rpc        string
	capability rpc.Capability
	params     []string
	read       bool
	handle     func(a *api, q *request) error
	// maxBody caps the request body of a route that reads one (0: the
	// route takes none), and cost is what reading and parsing a body of
	// n bytes may allocate (bodies.go).
	maxBody int64
	cost    func(n int64) int64
}

// serverRoutes is a server's whole HTTP API (SPEC §16).
var serverRoutes = []route{
	{method: "GET", path: "/v1/health", rpc: "Status.Leader", capability: rpc.CapPublic, handle: (*api).serverHealth},
	{method: "GET", path: "/v1/metrics", rpc: "Status.Raft", capability: rpc.CapOperatorRead, handle: (*api).serverMetrics},
	{method: "GET", path: "/v1/status", rpc: "Status.Cluster", capability: rpc.CapOperatorRead, read: true, handle: (*api).status},
	{method: "GET", path: "/v1/members", rpc: "Status.Members", capability: rpc.CapOperatorRead, handle: (*api).members},
	{method: "GET", path: "/v1/operator/raft/peers", rpc: "Operator.RaftGetConfiguration", capability: rpc.CapOperatorRead, read: true, handle: (*api).raftPeers},
	{method: "GET", path: "/v1/nodes", rpc: "Node.List", capability: rpc.CapNodeRead, read: true, params: []string{"state"}, handle: (*api).nodes},
	{method: "GET", path: "/v1/node/{id}", rpc: "Node.Status", capability: rpc.CapNodeRead, read: true, handle: (*api).node},
	{method: "POST", path: "/v1/node/{id}/drain", rpc: "Node.Drain", capability: rpc.CapNodeWrite, handle: (*api).drain, maxBody: MaxDrainBody, cost: drainCost},
	{method: "GET", path: "/v1/queues", rpc: "Queue.List", capability: rpc.CapQueueRead, read: true, handle: (*api).queues},
	{method: "PUT", path: "/v1/queues", rpc: "Queue.Apply", capability: rpc.CapOperatorWrite, params: []string{"dry_run"}, handle: (*api).queueApply,
		maxBody: MaxQueueConfigBody, cost: queueConfigCost},
	{method: "GET", path: "/v1/queue/{name}", rpc: "Queue.Status", capability: rpc.CapQueueRead, read: true, handle: (*api).queue},
	{method: "GET", path: "/v1/apps", rpc: "App.List", capability: rpc.CapQueueRead, read: true, params: []string{"queue", "state", "user"}, handle: (*api).apps},
	{method: "POST", path: "/v1/apps", rpc: "App.Submit", capability: rpc.CapQueueSubmit, handle: (*api).submit, maxBody: MaxAppSpecBody, cost: appSpecCost},
	{method: "GET", path: "/v1/app/{id}", rpc: "App.Status", capability: rpc.CapQueueRead, read: true, handle: (*api).app},
	{method: "DELETE", path: "/v1/app/{id}", rpc: "App.Kill", capability: rpc.CapQueueSubmit, handle: (*api).kill},
	{method: "GET", path: "/v1/app/{id}/containers", rpc: "Container.List", capability: rpc.CapQueueRead, read: true, params: []string{"state"}, handle: (*api).appContainers},
	{method: "GET", path: "/v1/containers", rpc: "Container.List", capability: rpc.CapQueueRead, read: true, params: []string{"app", "node", "state"}, handle: (*api).containers},
	{method: "GET", path: "/v1/container/{id}/logs", rpc: "Container.Logs", capability: rpc.CapQueueRead, params: logParams, handle: (*api).logs},
	{method: "GET", path: "/v1/acl/token/self", rpc: "ACL.TokenSelf", capability: rpc.CapToken, handle: (*api).tokenSelf},
	{method: "GET", path: "/debug/pprof/{profile}", rpc: debugProbe, capability: rpc.CapOperatorWrite, params: pprofParams, handle: (*api).pprofProfile},
}

// agentRoutes is an agent's HTTP API: its health, its metrics, container
// logs and its profiles (both relayed through the servers, which check
// the token).
var agentRoutes = []route{
	{method: "GET", path: "/v1/health", capability: rpc.CapPublic, handle: (*api).agentHealth},
	{method: "GET", path: "/v1/metrics", capability: rpc.CapPublic, handle: (*api).serveMetrics},
	{method: "GET", path: "/v1/container/{id}/logs", rpc: "Container.Logs", capability: rpc.CapQueueRead, params: logParams, handle: (*api).logs},
	{method: "GET", path: "/debug/pprof/{profile}", rpc: debugProbe, capability: rpc.CapOperatorWrite, params: pprofParams, handle: (*api).pprofProfile},
}

// call calls method in process for the HTTP client of q.
func (a *api) call(q *request, method string, args, reply any) error {
	ctx := rpc.WithConnInfo(q.r.Context(), &rpc.ConnInfo{RemoteAddr: remoteAddr(q.r), TLS: q.r.TLS != nil, HTTP: true})
	return a.rpc.Call(ctx, method, args, reply)
}

// Health is the answer of GET /v1/health: the process is up. A server
// also names the leader it knows ("" for none).
type Health struct {
	Status   string `json:"status"`
	Role     string `json:"role"`
	NodeID   string `json:"node_id,omitempty"`
	Leader   string `json:"leader,omitempty"`
	LeaderID string `json:"leader_id,omitempty"`
}

func (a *api) serverHealth(q *request) error {
	var resp rpc.LeaderResponse
	if err := a.call(q, "Status.Leader", &q.header, &resp); err != nil {
		return err
	}
	writeJSON(q.w, http.StatusOK, Health{Status: "ok", Role: a.role, Leader: resp.Address, LeaderID: resp.ID})
	return nil
}

func (a *api) agentHealth(q *request) error {
	writeJSON(q.w, http.StatusOK, Health{Status: "ok", Role: "agent", NodeID: a.nodeID})
	return nil
}

// serverMetrics serves a server's metrics to a caller whose token grants
// operator:read: they name queues, their usage and the RPC methods, which
// the ACLs keep from anonymous callers elsewhere. The token is checked by
// calling Status.Raft (local, cheap, operator:read), the one code path for
// ACLs.
func (a *api) serverMetrics(q *request) error {
	var probe rpc.RaftStatus
	if err := a.call(q, "Status.Raft", &q.header, &probe); err != nil {
		return err
	}
	return a.serveMetrics(q)
}

// serveMetrics serves the process's metrics. An agent's are public, as in
// Nomad: they hold its own load and latencies, no queue or app names, and
// stay readable when no server is.
func (a *api) serveMetrics(q *request) error {
	if a.metrics == nil {
		return rpc.Errorf(rpc.CodeNotFound, "this process serves no metrics")
	}
	a.metrics.ServeHTTP(q.w, q.r)
	return nil
}

func (a *api) status(q *request) error {
	var resp rpc.ClusterStatus
	if err := a.call(q, "Status.Cluster", &q.header, &resp); err != nil {
		return err
	}
	resp.Servers = orEmpty(resp.Servers)
	setMeta(q.w, &resp.ResponseMeta)
	writeJSON(q.w, http.StatusOK, resp)
	return nil
}

func (a *api) members(q *request) error {
	var resp rpc.MembersResponse
	if err := a.call(q, "Status.Members", &q.header, &resp); err != nil {
		return err
	}
	writeJSON(q.w, http.StatusOK, orEmpty(resp.Members))
	return nil
}

func (a *api) raftPeers(q *request) error {
	var resp rpc.RaftConfigurationResponse
	if err := a.call(q, "Operator.RaftGetConfiguration", &q.header, &resp); err != nil {
		return err
	}
	setMeta(q.w, &resp.ResponseMeta)
	writeJSON(q.w, http.StatusOK, orEmpty(resp.Servers))
	return nil
}

func (a *api) nodes(q *request) error {
	var resp rpc.NodeListResponse
	if err := a.call(q, "Node.List", &rpc.NodeListRequest{RequestHeader: q.header, State: q.query.Get("state")}, &resp); err != nil {
		return err
	}
	setMeta(q.w, &resp.ResponseMeta)
	setUnreachable(q.w, resp.Unreachable)
	writeJSON(q.w, http.StatusOK, orEmpty(resp.Nodes))
	return nil
}

func (a *api) node(q *request) error {
	var resp rpc.NodeStatusResponse
	if err := a.call(q, "Node.Status", &rpc.NodeStatusRequest{RequestHeader: q.header, ID: q.r.PathValue("id")}, &resp); err != nil {
		return err
	}
	resp.Containers = orEmpty(resp.Containers)
	setMeta(q.w, &resp.ResponseMeta)
	writeJSON(q.w, http.StatusOK, resp)
	return nil
}

// drainBody is the optional body of POST /v1/node/{id}/drain.
type drainBody struct {
	// Deadline is how long running containers may go on ("30m"; default 1h).
	Deadline string `json:"deadline"`
	// Disable ends a drain: the node is READY again.
	Disable bool `json:"disable"`
}

// drain drains a node (SPEC §20) as `weft node drain` does: the body
// {"deadline": "30m"} or {"disable": true}, or none for the defaults.
func (a *api) drain(q *request) error {
	src, err := q.body()
	if err != nil {
		return err
	}
	var body drainBody
	if len(bytes.TrimSpace(src)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(src))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil {
			return badRequest("body: %v; give {\"deadline\": \"30m\"} or {\"disable\": true}; nothing was changed", err)
		}
	}
	req := rpc.NodeDrainRequest{RequestHeader: q.header, ID: q.r.PathValue("id"), Disable: body.Disable}
	if body.Deadline != "" {
		if req.Deadline, err = time.ParseDuration(body.Deadline); err != nil || req.Deadline <= 0 {
			return badRequest("deadline: %q; give how long running containers may go on, e.g. \"30m\"; nothing was changed", body.Deadline)
		}
	}
	var resp rpc.WriteResponse
	if err := a.call(q, "Node.Drain", &req, &resp); err != nil {
		return err
	}
	setIndex(q.w, resp.Index)
	writeJSON(q.w, http.StatusOK, resp)
	return nil
}

func (a *api) queues(q *request) error {
	var resp rpc.QueueListResponse
	if err := a.call(q, "Queue.List", &rpc.QueueListRequest{RequestHeader: q.header}, &resp); err != nil {
		return err
	}
	setMeta(q.w, &resp.ResponseMeta)
	setUnreachable(q.w, resp.Unreachable)
	writeJSON(q.w, http.StatusOK, orEmpty(resp.Queues))
	return nil
}

func (a *api) queue(q *request) error {
	var resp rpc.QueueStatusResponse
	if err := a.call(q, "Queue.Status", &rpc.QueueStatusRequest{RequestHeader: q.header, Name: q.r.PathValue("name")}, &resp); err != nil {
		return err
	}
	setMeta(q.w, &resp.ResponseMeta)
	setUnreachable(q.w, resp.Unreachable)
	if len(resp.Subclusters) > 0 { // a federation's router: the total, then each sub-cluster's
		writeJSON(q.w, http.StatusOK, struct {
			rpc.QueueInfo
			Subclusters []rpc.QueueInfo `json:"subclusters"`
		}{resp.Queue, resp.Subclusters})
		return nil
	}
	writeJSON(q.w, http.StatusOK, resp.Queue)
	return nil
}

// queueApply replaces the queue configuration with the body: HCL or JSON,
// as `weft queue apply` reads a file; with ?dry_run=true it only answers
// the plan (fair shares now and after, what becomes preemptable).
func (a *api) queueApply(q *request) error {
	dryRun, err := q.boolParam("dry_run")
	if err != nil {
		return err
	}
	src, err := q.body()
	if err != nil {
		return err
	}
	cfg, err := config.ParseQueueConfigBody("request body", src)
	if err != nil {
		return badRequest("%v; nothing was changed", err)
	}
	var resp rpc.QueueApplyResponse
	if err := a.call(q, "Queue.Apply", &rpc.QueueApplyRequest{RequestHeader: q.header, Config: cfg, DryRun: dryRun}, &resp); err != nil {
		return err
	}
	setIndex(q.w, resp.Index)
	writeJSON(q.w, http.StatusOK, resp)
	return nil
}

func (a *api) apps(q *request) error {
	req := rpc.AppListRequest{RequestHeader: q.header, Queue: q.query.Get("queue"), State: q.query.Get("state"), User: q.query.Get("user")}
	var resp rpc.AppListResponse
	if err := a.call(q, "App.List", &req, &resp); err != nil {
		return err
	}
	setMeta(q.w, &resp.ResponseMeta)
	setUnreachable(q.w, resp.Unreachable)
	writeJSON(q.w, http.StatusOK, orEmpty(resp.Apps))
	return nil
}

// submit submits the app spec of the body: the format of `weft app submit
// -spec FILE`, in JSON.
func (a *api) submit(q *request) error {
	src, err := q.body()
	if err != nil {
		return err
	}
	spec, err := config.ParseAppSpecBody("request body", src)
	if err != nil {
		return badRequest("%v; nothing was submitted", err)
	}
	var resp rpc.AppSubmitResponse
	if err := a.call(q, "App.Submit", &rpc.AppSubmitRequest{RequestHeader: q.header, Spec: spec}, &resp); err != nil {
		return err
	}
	setIndex(q.w, resp.Index)
	writeJSON(q.w, http.StatusOK, resp)
	return nil
}

func (a *api) app(q *request) error {
	var resp rpc.AppStatusResponse
	if err := a.call(q, "App.Status", &rpc.AppRequest{RequestHeader: q.header, AppID: q.r.PathValue("id")}, &resp); err != nil {
		return err
	}
	setMeta(q.w, &resp.ResponseMeta)
	writeJSON(q.w, http.StatusOK, resp.App)
	return nil
}

func (a *api) kill(q *request) error {
	var resp rpc.WriteResponse
	if err := a.call(q, "App.Kill", &rpc.AppRequest{RequestHeader: q.header, AppID: q.r.PathValue("id")}, &resp); err != nil {
		return err
	}
	setIndex(q.w, resp.Index)
	writeJSON(q.w, http.StatusOK, resp)
	return nil
}

func (a *api) appContainers(q *request) error {
	id := q.r.PathValue("id")
	// An unknown app is a 404, not an empty list.
	var app rpc.AppStatusResponse
	hdr := q.header
	hdr.MinQueryIndex, hdr.MaxWait = 0, 0
	if err := a.call(q, "App.Status", &rpc.AppRequest{RequestHeader: hdr, AppID: id}, &app); err != nil {
		return err
	}
	return a.listContainers(q, rpc.ContainerListRequest{RequestHeader: q.header, AppID: id, State: q.query.Get("state")})
}

func (a *api) containers(q *request) error {
	return a.listContainers(q, rpc.ContainerListRequest{RequestHeader: q.header, AppID: q.query.Get("app"), NodeID: q.query.Get("node"), State: q.query.Get("state")})
}

func (a *api) listContainers(q *request, req rpc.ContainerListRequest) error {
	var resp rpc.ContainerListResponse
	if err := a.call(q, "Container.List", &req, &resp); err != nil {
		return err
	}
	setMeta(q.w, &resp.ResponseMeta)
	setUnreachable(q.w, resp.Unreachable)
	writeJSON(q.w, http.StatusOK, orEmpty(resp.Containers))
	return nil
}

func (a *api) tokenSelf(q *request) error {
	var resp rpc.ACLTokenResponse
	if err := a.call(q, "ACL.TokenSelf", &q.header, &resp); err != nil {
		return err
	}
	resp.Token.SecretID = "" // the caller has it; it is not echoed
	writeJSON(q.w, http.StatusOK, resp.Token)
	return nil
}

// Routes lists a server's routes as "METHOD PATH" with the capability each
// asks of the caller's token (for docs and tests).
func Routes() map[string]rpc.Capability { return routeTable(serverRoutes) }

// AgentRoutes is Routes for an agent.
func AgentRoutes() map[string]rpc.Capability { return routeTable(agentRoutes) }

func routeTable(rs []route) map[string]rpc.Capability {
	out := make(map[string]rpc.Capability, len(rs))
	for _, r := range rs {
		out[r.method+" "+r.path] = r.capability
	}
	return out
}
