package server

import (
	"fmt"
	"strings"
	"time"

	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// App holds the application endpoints of the command line.
type App struct{ srv *Server }

// Submit validates and submits an app; the reply carries its ID.
func (e *App) Submit(args *wrpc.AppSubmitRequest, reply *wrpc.AppSubmitResponse) error {
	if done, err := e.srv.forwardWrite("App.Submit", args, reply); done {
		return err
	}
	spec := args.Spec
	spec.SetDefaults()
	if err := spec.Validate(); err != nil {
		return fmt.Errorf("invalid app: %w", err)
	}
	if _, err := e.srv.fsm.State().QueueConfig().CheckSubmitQueue(spec.Queue); err != nil {
		return err
	}
	res, index, err := e.srv.raftApply(fsm.AppSubmitType, &fsm.AppSubmitRequest{Spec: spec, Now: time.Now().UnixNano()})
	if err != nil {
		return err
	}
	reply.AppID, reply.Index = res.(string), index
	return nil
}

// List returns apps, optionally filtered by queue and state.
func (e *App) List(args *wrpc.AppListRequest, reply *wrpc.AppListResponse) error {
	if done, err := e.srv.forwardRead("App.List", &args.RequestHeader, args, reply); done {
		return err
	}
	queue := args.Queue
	if queue != "" && !strings.HasPrefix(queue, scheduler.RootQueue+".") {
		queue = scheduler.RootQueue + "." + queue
	}
	state := strings.ToUpper(args.State)
	return e.srv.blockingQuery(&args.RequestHeader, &reply.ResponseMeta, func(st *fsm.State) (uint64, error) {
		reply.Apps = reply.Apps[:0]
		waiting := scheduler.WaitingApps(st)
		for _, a := range st.Apps() {
			if queue != "" && a.Queue != queue || state != "" && string(a.State) != state {
				continue
			}
			reply.Apps = append(reply.Apps, appInfo(a, st, waiting))
		}
		return max(st.TableIndex(fsm.TableApps), st.TableIndex(fsm.TableContainers)), nil
	})
}

// Status returns one app. As a blocking query it wakes when the app changes.
func (e *App) Status(args *wrpc.AppRequest, reply *wrpc.AppStatusResponse) error {
	if done, err := e.srv.forwardRead("App.Status", &args.RequestHeader, args, reply); done {
		return err
	}
	return e.srv.blockingQuery(&args.RequestHeader, &reply.ResponseMeta, func(st *fsm.State) (uint64, error) {
		a, ok := st.App(args.AppID)
		if !ok {
			return 0, fmt.Errorf("app %s %w", args.AppID, wrpc.ErrNotFound)
		}
		reply.App = appInfo(a, st, scheduler.WaitingApps(st))
		index := a.ModifyIndex
		for _, c := range st.AppContainers(a.ID) {
			index = max(index, c.ModifyIndex)
		}
		return index, nil
	})
}

// Kill ends an app as KILLED and stops its containers.
func (e *App) Kill(args *wrpc.AppRequest, reply *wrpc.WriteResponse) error {
	if done, err := e.srv.forwardWrite("App.Kill", args, reply); done {
		return err
	}
	if _, ok := e.srv.fsm.State().App(args.AppID); !ok {
		return fmt.Errorf("app %s %w", args.AppID, wrpc.ErrNotFound)
	}
	_, index, err := e.srv.raftApply(fsm.AppFinishType, &fsm.AppFinishRequest{
		AppID: args.AppID, State: scheduler.AppKilled, Diagnostics: "killed by user", Now: time.Now().UnixNano(),
	})
	reply.Index = index
	return err
}

// Container holds the container listing and log relay on servers.
type Container struct{ srv *Server }

// List returns containers, by app and/or node.
func (e *Container) List(args *wrpc.ContainerListRequest, reply *wrpc.ContainerListResponse) error {
	if done, err := e.srv.forwardRead("Container.List", &args.RequestHeader, args, reply); done {
		return err
	}
	return e.srv.blockingQuery(&args.RequestHeader, &reply.ResponseMeta, func(st *fsm.State) (uint64, error) {
		var cs []*scheduler.Container
		switch {
		case args.AppID != "":
			cs = st.AppContainers(args.AppID)
		default:
			cs = st.Containers()
		}
		reply.Containers = reply.Containers[:0]
		for _, c := range cs {
			if args.NodeID != "" && c.NodeID != args.NodeID {
				continue
			}
			addr := ""
			if n, ok := st.Node(c.NodeID); ok {
				addr = n.Address
			}
			reply.Containers = append(reply.Containers, wrpc.NewContainerInfo(c, addr))
		}
		return st.TableIndex(fsm.TableContainers), nil
	})
}

// Logs relays a log read to the container's node (any server may answer).
func (e *Container) Logs(args *wrpc.ContainerLogsRequest, reply *wrpc.ContainerLogsResponse) error {
	st := e.srv.fsm.State()
	c, ok := st.Container(args.ID)
	if !ok {
		return fmt.Errorf("container %s %w", args.ID, wrpc.ErrNotFound)
	}
	n, ok := st.Node(c.NodeID)
	if !ok {
		return fmt.Errorf("node %s of container %s %w", c.NodeID, args.ID, wrpc.ErrNotFound)
	}
	if err := e.srv.pool.Call(n.Address, "Container.Logs", args, reply); err != nil {
		if !wrpc.IsServerError(err) {
			return fmt.Errorf("node %s (%s), which holds the logs of %s, is unreachable: %v", n.ID, n.Address, args.ID, err)
		}
		return err
	}
	return nil
}

// appInfo describes an app, saying why it waits if max_running_apps holds
// it back.
func appInfo(a *scheduler.App, st *fsm.State, waiting map[string]string) wrpc.AppInfo {
	info := wrpc.NewAppInfo(a, st.AppContainers(a.ID))
	if why, ok := waiting[a.ID]; ok {
		info.Diagnostics = "waiting: " + why
	}
	return info
}
