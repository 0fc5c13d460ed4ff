package rpc

import (
	"fmt"
	"strings"
	"testing"

	"github.com/weft-sched/weft/scheduler"
)

// The largest requests weft's own processes send fit the bounds their
// methods declare (MaxBody at Register in server, agent and router):
// DefaultMaxBody for everything not listed here, MaxListBody, MaxSpecBody
// and MaxRequestSize for the rest. The sizes logged are the measurements
// the bounds were chosen from.
func TestWeftsLargestRequestsFitTheirBounds(t *testing.T) {
	code := 137
	reports := make([]ContainerReport, 10000)
	for i := range reports {
		reports[i] = ContainerReport{ID: fmt.Sprintf("c-%d-%d", 1000000+i, i%50), AppID: fmt.Sprintf("app-%d", 100000+i), Attempt: 1, AskID: 3,
			Resources: scheduler.Resources{MemoryMB: 1024, Vcores: 1}, ExecutionType: "GUARANTEED", State: "COMPLETED", ExitCode: &code,
			Reason: "killed", Diagnostics: "container killed by the AM after 3 attempts", AllocatedAt: 1e18, StartedAt: 1e18, At: 1e18}
	}
	apps := make([]string, MaxAppsToCheck)
	for i := range apps {
		apps[i] = fmt.Sprintf("app-%d", 100000+i)
	}
	heartbeat := &HeartbeatRequest{NodeID: "node-0123.rack-04.example.com", Epoch: 5, Secret: strings.Repeat("a", 64), Containers: reports, AppsToCheck: apps}
	small := *heartbeat
	small.Containers = reports[:100]
	batch := &HeartbeatBatchRequest{Heartbeats: make([]HeartbeatRequest, MaxHeartbeatBatch)}
	for i := range batch.Heartbeats {
		batch.Heartbeats[i] = small
	}
	splits := make([]scheduler.Split, scheduler.MaxSplits)
	for i := range splits {
		splits[i] = scheduler.Split{Path: fmt.Sprintf("/shared/data/input/part-%05d", i), Nodes: []string{"node-1.rack-1", "node-2.rack-2", "node-3.rack-3"}, Racks: []string{"rack-1", "rack-2"}}
	}
	submit := &AppSubmitRequest{Spec: scheduler.AppSpec{Name: "wc", Queue: "root.a", AMType: scheduler.AMTypeMapReduce, MapReduce: &scheduler.MapReduce{
		Splits: splits, Map: []string{"/bin/wc-map"}, Reduce: []string{"/bin/wc-reduce"}, Reducers: scheduler.MaxReducers, Output: "/shared/out"}}}
	dshell := &AppSubmitRequest{Spec: scheduler.AppSpec{Name: "sleep", Queue: "root.a", DShell: scheduler.DShell{NumContainers: 10, Command: []string{"sleep", "10"}}}}
	root := scheduler.NewQueueSpec("root")
	for i := 0; i < 50; i++ {
		dept := scheduler.NewQueueSpec(fmt.Sprintf("dept%02d", i))
		for j := 0; j < 20; j++ {
			team := scheduler.NewQueueSpec(fmt.Sprintf("team%02d", j))
			limit, running := scheduler.Resources{MemoryMB: 1 << 20, Vcores: 1000}, 10
			team.MaxResources, team.MaxRunningApps = &limit, &running
			team.MinResources = scheduler.Resources{MemoryMB: 1024, Vcores: 1}
			dept.Children = append(dept.Children, team)
		}
		root.Children = append(root.Children, dept)
	}
	queues := &QueueApplyRequest{Config: &scheduler.QueueConfig{Scheduler: scheduler.DefaultSchedulerConfig(), Root: root}}
	feeders := make([]scheduler.Feeder, scheduler.MaxFeeders)
	for i := range feeders {
		feeders[i] = scheduler.Feeder{Node: fmt.Sprintf("node-%04d.rack-%02d", i, i%40), Bytes: 1 << 30}
	}
	asks := make([]scheduler.Ask, 8)
	for i := range asks {
		asks[i] = scheduler.Ask{AskID: uint64(i + 1), Count: 1, Resources: scheduler.Resources{MemoryMB: 256, Vcores: 1}, ExecutionType: "GUARANTEED", Feeders: feeders}
	}
	counters := scheduler.Counters{}
	for i := 0; i < 1024; i++ {
		counters[fmt.Sprintf("mapreduce.counter-%04d.%s", i, strings.Repeat("x", 30))] = 1 << 40
	}
	ids := make([]string, 10000)
	for i := range ids {
		ids[i] = fmt.Sprintf("c-%d-%d", 1000000+i, i%50)
	}
	token := strings.Repeat("t", 400)
	allocate := &AMAllocateRequest{AppID: "app-123456", Attempt: 1, Token: token, Asks: asks, Releases: ids, Counters: counters}
	finish := &AMFinishRequest{AppID: "app-123456", Attempt: 1, Token: token, FinalState: "FAILED", Diagnostics: strings.Repeat("d", 4096), Counters: counters}
	status := &ContainerStatusRequest{IDs: ids, Token: token}
	env := map[string]string{}
	for i := 0; i < 50; i++ {
		env[fmt.Sprintf("VAR_%d", i)] = strings.Repeat("v", 100)
	}
	command := make([]string, scheduler.MaxJobCommandArgs)
	for i := range command {
		command[i] = strings.Repeat("a", scheduler.MaxJobCommandLen/scheduler.MaxJobCommandArgs)
	}
	start := &ContainerStartRequest{Token: token, Container: ContainerInfo{ID: "c-1-1", AppID: "app-1", NodeID: "n1", Token: token}, Launch: LaunchSpec{Command: command, Env: env}}
	nodes := make([]string, MaxResolveNodes)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("node-%04d.rack-%02d.example.com", i, i%40)
	}
	resolve := &FederationResolveNodesRequest{Nodes: nodes}

	for _, tc := range []struct {
		what  string
		req   any
		bound int
	}{
		{"Node.Heartbeat of 10,000 containers", heartbeat, MaxRequestSize},
		{"Node.HeartbeatBatch of 256 heartbeats of 100 containers", batch, MaxRequestSize},
		{"App.Submit of a job of 10,000 splits", submit, MaxSpecBody},
		{"App.Submit of a dshell app", dshell, DefaultMaxBody},
		{"Queue.Apply of 1,000 queues", queues, MaxSpecBody},
		{"AM.Allocate of 8 reduce asks of 4,096 feeders, 10,000 releases, 1,024 counters", allocate, MaxRequestSize},
		{"AM.Finish with 1,024 counters", finish, MaxListBody},
		{"Container.Status of 10,000 containers", status, MaxListBody},
		{"Container.Start of a 64 KiB command", start, MaxListBody},
		{"Federation.ResolveNodes (and Node.Which) of 1,024 nodes", resolve, MaxListBody},
	} {
		raw, err := Encode(tc.req)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%-80s %9d bytes (bound %s)", tc.what, len(raw), byteSize(int64(tc.bound)))
		if len(raw) > tc.bound {
			t.Errorf("%s: %d bytes, over its bound of %d", tc.what, len(raw), tc.bound)
		}
	}
}
