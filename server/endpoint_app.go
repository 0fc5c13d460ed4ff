package server

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	"github.com/weft-sched/weft/acl"
	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// App holds the application endpoints of the command line.
type App struct{ srv *Server }

// Submit validates and submits an app; the reply carries its ID. A retried
// submit (same request ID) gets the first answer and creates nothing.
func (e *App) Submit(ctx context.Context, args *wrpc.AppSubmitRequest, reply *wrpc.AppSubmitResponse) error {
	if done, err := e.srv.forwardWrite(ctx, "App.Submit", args, reply); done {
		return err
	}
	spec := args.Spec
	st := e.srv.fsm.State()
	queue, err := e.submitQueue(ctx, st, spec.Queue)
	if err != nil {
		return err
	}
	if err := e.srv.allowQueue(ctx, "App.Submit", queue, acl.LevelSubmit); err != nil {
		return err
	}
	if e.srv.config.ACLEnabled {
		// With ACLs on, an app runs as its token's name (SPEC §15).
		name := e.srv.callerOf(ctx).name()
		if spec.User != "" && spec.User != name {
			return wrpc.Errorf(wrpc.CodeBadRequest, "invalid app: user: with ACLs on, an app's user is its token's name (%s), not %q; leave user out", name, spec.User)
		}
		spec.User = name
	}
	spec.SetDefaults()
	if err := spec.Validate(); err != nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "invalid app: %v", err)
	}
	if strings.TrimSpace(spec.User) == "" {
		return wrpc.Errorf(wrpc.CodeBadRequest, "invalid app: user: give the submitting user")
	}
	if err := checkFitsSomeNode(st.Nodes(), &spec); err != nil {
		return err
	}
	res, index, err := e.srv.raftApplyRequest(ctx, &args.RequestHeader, fsm.AppSubmitType, &fsm.AppSubmitRequest{Spec: spec, Now: e.srv.clock.Now().UnixNano(),
		UIDs: e.srv.config.DynamicUIDs})
	if err != nil {
		return err
	}
	reply.AppID, reply.Index, reply.RequestID = res.(string), index, args.RequestID
	return nil
}

// submitQueue is the leaf queue an app submitted to name goes to. A queue
// the caller may not read is answered as one that does not exist, and the
// leaves an answer names are those it may read: submitting must not tell
// a caller which queues it cannot see exist.
func (e *App) submitQueue(ctx context.Context, st *fsm.State, name string) (string, error) {
	cfg := st.QueueConfig()
	if !e.srv.config.ACLEnabled || e.srv.callerOf(ctx).acl.IsManagement() {
		queue, err := cfg.CheckSubmitQueue(name)
		if err != nil {
			return "", wrpc.Errorf(wrpc.CodeBadRequest, "%v", err)
		}
		return queue, nil
	}
	path := scheduler.SubmitQueuePath(name)
	var leaves []string
	parent := false
	for _, q := range st.Queues() {
		if !e.srv.canReadQueue(ctx, q.Path) {
			continue
		}
		switch {
		case q.Path == path && q.IsLeaf():
			return path, nil
		case q.Path == path:
			parent = true
		case q.IsLeaf():
			leaves = append(leaves, q.Path)
		}
	}
	if len(leaves) == 0 {
		leaves = []string{"none"}
	}
	if parent {
		return "", wrpc.Errorf(wrpc.CodeBadRequest, "queue %s is a parent queue; submit to a leaf: %s", path, strings.Join(leaves, ", "))
	}
	return "", wrpc.Errorf(wrpc.CodeBadRequest, "%s; leaf queues it may read are: %s", e.srv.notFoundText(ctx, "queue "+path, "queues"), strings.Join(leaves, ", "))
}

// checkFitsSomeNode refuses an app whose AM or containers are larger than
// every READY node: it would wait forever. With no READY node nothing is
// known yet, and the app may wait for one.
func checkFitsSomeNode(nodes []*scheduler.Node, spec *scheduler.AppSpec) error {
	if largest, too := tooLarge(nodes, spec.AMResources); too {
		return wrpc.Errorf(wrpc.CodeBadRequest, "am_resources %s is larger than every node; the largest is %s (%s)", spec.AMResources, largest.ID, largest.Capacity)
	}
	type sized struct {
		field string
		res   scheduler.Resources
	}
	containers := []sized{{"resources", spec.DShell.Resources}}
	if job := spec.MapReduce; job != nil {
		containers = []sized{{"mapreduce.map_resources", job.MapResources}, {"mapreduce.reduce_resources", job.ReduceResources}}
	}
	for _, c := range containers {
		if largest, too := tooLarge(nodes, c.res); too {
			return wrpc.Errorf(wrpc.CodeBadRequest, "%s %s of each container are larger than every node; the largest is %s (%s)", c.field, c.res, largest.ID, largest.Capacity)
		}
	}
	return nil
}

// tooLarge reports whether r fits no READY node (there being some), and
// which READY node is the largest (most memory, then most vcores).
func tooLarge(nodes []*scheduler.Node, r scheduler.Resources) (*scheduler.Node, bool) {
	var largest *scheduler.Node
	for _, n := range nodes {
		if n.Status != scheduler.NodeReady {
			continue
		}
		if r.Fits(n.Capacity) {
			return nil, false
		}
		if largest == nil || n.Capacity.MemoryMB > largest.Capacity.MemoryMB ||
			n.Capacity.MemoryMB == largest.Capacity.MemoryMB && n.Capacity.Vcores > largest.Capacity.Vcores {
			largest = n
		}
	}
	return largest, largest != nil
}

// List returns apps, optionally filtered by queue, state and user, in
// numeric ID order.
func (e *App) List(ctx context.Context, args *wrpc.AppListRequest, reply *wrpc.AppListResponse) error {
	if done, err := e.srv.forwardRead(ctx, "App.List", &args.RequestHeader, args, reply); done {
		return err
	}
	queue := args.Queue
	if queue != "" && !strings.HasPrefix(queue, scheduler.RootQueue+".") {
		queue = scheduler.RootQueue + "." + queue
	}
	state, err := scheduler.ParseAppState(args.State)
	if err != nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "invalid filter: %v", err)
	}
	return e.srv.blockingQuery(ctx, &args.RequestHeader, &reply.ResponseMeta, appListIndex, func(st *fsm.State) (uint64, error) {
		reply.Apps = reply.Apps[:0]
		pending := e.srv.whyPending(st)
		for _, a := range st.Apps() {
			if queue != "" && a.Queue != queue || state != "" && a.State != state || args.User != "" && a.Spec.User != args.User ||
				!e.srv.canReadQueue(ctx, a.Queue) {
				continue
			}
			reply.Apps = append(reply.Apps, appInfo(a, st, pending))
		}
		sort.Slice(reply.Apps, func(i, j int) bool { return scheduler.CompareIDs(reply.Apps[i].ID, reply.Apps[j].ID) < 0 })
		return appListIndex(st)
	})
}

// appListIndex is the index an app listing depends on: the apps and their
// containers.
func appListIndex(st *fsm.State) (uint64, error) {
	return max(st.TableIndex(fsm.TableApps), st.TableIndex(fsm.TableContainers)), nil
}

// Status returns one app. As a blocking query it wakes when the app changes.
func (e *App) Status(ctx context.Context, args *wrpc.AppRequest, reply *wrpc.AppStatusResponse) error {
	if done, err := e.srv.forwardRead(ctx, "App.Status", &args.RequestHeader, args, reply); done {
		return err
	}
	// The app's own index: it and its containers.
	watch := func(st *fsm.State) (uint64, error) {
		a, ok := st.App(args.AppID)
		if !ok || !e.srv.canReadQueue(ctx, a.Queue) {
			return 0, e.srv.notFound(ctx, "app "+args.AppID, "apps")
		}
		index := a.ModifyIndex
		for _, c := range st.AppContainers(a.ID) {
			index = max(index, c.ModifyIndex)
		}
		return index, nil
	}
	return e.srv.blockingQuery(ctx, &args.RequestHeader, &reply.ResponseMeta, watch, func(st *fsm.State) (uint64, error) {
		index, err := watch(st)
		if err != nil {
			return 0, err
		}
		a, _ := st.App(args.AppID)
		reply.App = appInfo(a, st, e.srv.whyPending(st))
		// Counters in the app's status only: a list of many apps would
		// carry up to MaxCounters of each.
		reply.App.Counters = maps.Clone(a.Counters)
		if !a.State.Terminal() {
			reply.App.Headroom = e.srv.headrooms.of(st, a)
		}
		return index, nil
	})
}

// Kill ends an app as KILLED and stops its containers. Killing an app that
// has already ended changes nothing and says so, whatever its end was.
func (e *App) Kill(ctx context.Context, args *wrpc.AppRequest, reply *wrpc.WriteResponse) error {
	if done, err := e.srv.forwardWrite(ctx, "App.Kill", args, reply); done {
		return err
	}
	ended := func(a *scheduler.App) error {
		reply.Warnings = append(reply.Warnings, fmt.Sprintf("app %s had already ended (%s); nothing to kill", a.ID, a.State))
		return nil
	}
	a, ok := e.srv.fsm.State().App(args.AppID)
	if !ok || !e.srv.canReadQueue(ctx, a.Queue) {
		return e.srv.notFound(ctx, "app "+args.AppID, "apps")
	}
	if err := e.srv.allowKill(ctx, a); err != nil {
		return err
	}
	if a.State.Terminal() {
		return ended(a)
	}
	_, index, err := e.srv.raftApplyRequest(ctx, &args.RequestHeader, fsm.AppFinishType, &fsm.AppFinishRequest{
		AppID: args.AppID, State: scheduler.AppKilled, Diagnostics: "killed by user", Now: e.srv.clock.Now().UnixNano(),
	})
	reply.Index = index
	if err != nil && wrpc.ErrorCode(err) == wrpc.CodeConflict {
		if a, ok := e.srv.fsm.State().App(args.AppID); ok && a.State.Terminal() {
			return ended(a) // it ended on its own meanwhile
		}
	}
	return err
}

// Container holds the container listing and log relay on servers.
type Container struct{ srv *Server }

// List returns containers, by app and/or node.
func (e *Container) List(ctx context.Context, args *wrpc.ContainerListRequest, reply *wrpc.ContainerListResponse) error {
	if done, err := e.srv.forwardRead(ctx, "Container.List", &args.RequestHeader, args, reply); done {
		return err
	}
	state, err := scheduler.ParseContainerState(args.State)
	if err != nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "invalid filter: %v", err)
	}
	return e.srv.blockingQuery(ctx, &args.RequestHeader, &reply.ResponseMeta, containersIndex, func(st *fsm.State) (uint64, error) {
		var cs []*scheduler.Container
		switch {
		case args.AppID != "":
			cs = st.AppContainers(args.AppID)
		default:
			cs = st.Containers()
		}
		reply.Containers = reply.Containers[:0]
		readable := map[string]bool{}
		for _, c := range cs {
			if args.NodeID != "" && c.NodeID != args.NodeID || state != "" && c.State != state {
				continue
			}
			ok, seen := readable[c.AppID]
			if !seen {
				a, found := st.App(c.AppID)
				ok = found && e.srv.canReadQueue(ctx, a.Queue)
				readable[c.AppID] = ok
			}
			if !ok {
				continue
			}
			node, _ := st.Node(c.NodeID)
			reply.Containers = append(reply.Containers, wrpc.NewContainerInfo(c, node))
		}
		sort.Slice(reply.Containers, func(i, j int) bool {
			return scheduler.CompareIDs(reply.Containers[i].ID, reply.Containers[j].ID) < 0
		})
		return containersIndex(st)
	})
}

// containersIndex is the index a container listing depends on.
func containersIndex(st *fsm.State) (uint64, error) { return st.TableIndex(fsm.TableContainers), nil }

// Logs relays a log read to the container's node (any server may answer).
func (e *Container) Logs(ctx context.Context, args *wrpc.ContainerLogsRequest, reply *wrpc.ContainerLogsResponse) error {
	st := e.srv.fsm.State()
	c, ok := st.Container(args.ID)
	var a *scheduler.App
	if ok {
		a, ok = st.App(c.AppID)
	}
	if !ok || !e.srv.canReadQueue(ctx, a.Queue) {
		return e.srv.notFound(ctx, "container "+args.ID, "containers")
	}
	n, ok := st.Node(c.NodeID)
	if !ok {
		return wrpc.Errorf(wrpc.CodeNotFound, "node %s of container %s not found", c.NodeID, args.ID)
	}
	// The agent serves logs only with a token for the container: the
	// server vouches for this read with one of its own.
	tok, err := e.srv.relayToken(st, c)
	if err != nil {
		return noKey(err)
	}
	args.Token = tok
	if err := e.srv.agentPool.Call(ctx, n.Address, "Container.Logs", args, reply); err != nil {
		if !wrpc.IsServerError(err) {
			return wrpc.Errorf(wrpc.CodeUnavailable, "node %s (%s), which holds the logs of %s, is unreachable: %v", n.ID, n.Address, args.ID, err)
		}
		return err
	}
	return nil
}

// appInfo describes an app, and why it waits if it does.
func appInfo(a *scheduler.App, st *fsm.State, pending map[string]scheduler.PendingReason) wrpc.AppInfo {
	info := wrpc.NewAppInfo(a, st.AppContainers(a.ID))
	info.BlacklistIgnored = blacklistIgnored(st, a)
	for i := range a.Reservations {
		info.Reservations = append(info.Reservations, wrpc.NewReservationInfo(&a.Reservations[i]))
	}
	if why, ok := pending[a.ID]; ok {
		info.WhyPending = &wrpc.PendingInfo{Code: why.Code, Message: why.Message}
	}
	return info
}

// whyPending explains every unplaced app of st (SPEC §16). The leader
// counts the locality opportunities each ask has missed; a follower
// answering a stale read knows none.
func (s *Server) whyPending(st *fsm.State) map[string]scheduler.PendingReason {
	var locality scheduler.LocalityMemory
	if s.IsLeader() {
		locality = lockedWaits{s}
	}
	return scheduler.WhyPending(st, s.clock.Now(), locality)
}

// lockedWaits reads the scheduling loop's delay-scheduling memory while
// the loop may be updating it.
type lockedWaits struct{ s *Server }

func (l lockedWaits) Wait(appID string, askID uint64) (int, time.Time, bool) {
	l.s.waitsMu.Lock()
	defer l.s.waitsMu.Unlock()
	return l.s.waits.Wait(appID, askID)
}
