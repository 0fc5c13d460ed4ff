package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// subclusterRow is the part of `weft federation subclusters -json` the
// tests read.
type subclusterRow struct {
	ID         string `json:"id"`
	State      string `json:"state"`
	Reason     string `json:"reason"`
	NodesReady int    `json:"nodes_ready"`
	// UnmanagedAMs counts apps spanning into the sub-cluster.
	UnmanagedAMs int `json:"unmanaged_ams"`
	Capacity     struct {
		Vcores int64 `json:"vcores"`
	} `json:"capacity"`
	Used struct {
		Vcores int64 `json:"vcores"`
	} `json:"used"`
}

// TestRoutersHoldASubcluster runs three `weft router` processes and a
// sub-cluster of one server and one agent, all real processes on
// loopback: the routers form their quorum, the sub-cluster's leader
// reports to them and is RUNNING with its agent's capacity; the router
// leader killed, another leads within seconds and every router still
// holds the sub-cluster; an operator decommissions it and it stays
// DECOMMISSIONED while it reports, recommissioned it is RUNNING again; its
// server killed, it is LOST after subcluster_timeout.
func TestRoutersHoldASubcluster(t *testing.T) {
	ip := "127.0.0.1"
	type router struct {
		p    *proc
		addr string
	}
	var routers []router
	var serfAddrs []string
	for i := 1; i <= 3; i++ {
		rpc, serf := freePort(t, ip), freePort(t, ip)
		routers = append(routers, router{addr: net.JoinHostPort(ip, strconv.Itoa(rpc))})
		serfAddrs = append(serfAddrs, net.JoinHostPort(ip, strconv.Itoa(serf)))
	}
	for i := range routers {
		id := fmt.Sprint("r", i+1)
		args := []string{"router", "-node-id", id, "-data-dir", filepath.Join(t.TempDir(), id), "-bind", ip,
			"-rpc-port", strings.Split(routers[i].addr, ":")[1], "-serf-port", strings.Split(serfAddrs[i], ":")[1],
			"-bootstrap-expect", "3", "-subcluster-timeout", "3s"}
		for j, a := range serfAddrs {
			if j != i {
				args = append(args, "-join", a)
			}
		}
		routers[i].p = startProc(t, id, args...)
	}

	rpcPort, serfPort := freePort(t, ip), freePort(t, ip)
	srv := startProc(t, "s1", "server", "-node-id", "s1", "-data-dir", filepath.Join(t.TempDir(), "s1"), "-bind", ip,
		"-rpc-port", strconv.Itoa(rpcPort), "-serf-port", strconv.Itoa(serfPort), "-bootstrap-expect", "1",
		"-subcluster-id", "sc1", "-router", routers[0].addr, "-router", routers[1].addr, "-subcluster-heartbeat", "500ms")
	agentRPC, agentSerf := freePort(t, "127.0.0.2"), freePort(t, "127.0.0.2")
	startProc(t, "a1", "agent", "-node-id", "a1", "-data-dir", filepath.Join(t.TempDir(), "a1"), "-bind", "127.0.0.2",
		"-rpc-port", strconv.Itoa(agentRPC), "-serf-port", strconv.Itoa(agentSerf),
		"-join", net.JoinHostPort(ip, strconv.Itoa(serfPort)), "-resources", "memory_mb=2048,vcores=4", "-allow-root")

	subcluster := func(addr string) (subclusterRow, error) {
		var rows []subclusterRow
		if err := cliJSON(t, &rows, "federation", "subclusters", "-address", addr); err != nil {
			return subclusterRow{}, err
		}
		if len(rows) != 1 || rows[0].ID != "sc1" {
			return subclusterRow{}, fmt.Errorf("sub-clusters %+v", rows)
		}
		return rows[0], nil
	}
	waitState := func(what, addr, state string, timeout time.Duration) {
		waitFor(t, timeout, what, func() error {
			sc, err := subcluster(addr)
			if err == nil && sc.State != state {
				err = fmt.Errorf("sc1 is %s (%s)", sc.State, sc.Reason)
			}
			return err
		})
	}
	waitState("sc1 RUNNING at the routers", routers[2].addr, "RUNNING", 60*time.Second)
	if sc, err := subcluster(routers[2].addr); err != nil || sc.Capacity.Vcores != 4 || sc.NodesReady != 1 {
		t.Fatalf("sc1: %+v, %v; want the agent's 4 vcores on one READY node", sc, err)
	}

	// Kill the router leader: another leads, and every router left holds sc1.
	leader := -1
	for i, r := range routers {
		b, _ := os.ReadFile(r.p.log)
		if strings.Contains(string(b), "leader is ready") {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no router logged that it leads")
	}
	routers[leader].p.kill()
	killed := time.Now()
	var rest []string
	for i, r := range routers {
		if i != leader {
			rest = append(rest, r.addr)
		}
	}
	waitFor(t, 30*time.Second, "a new router leader answering", func() error {
		for _, addr := range rest {
			if _, err := subcluster(addr); err != nil {
				return err
			}
		}
		return nil
	})
	t.Logf("routers answered again %s after their leader was killed", time.Since(killed).Round(time.Millisecond))

	// An operator retires sc1; its reports do not bring it back; then
	// takes it back.
	if out, errOut, code := cli(t, "federation", "subcluster", "decommission", "sc1", "-address", rest[0]); code != 0 || !strings.Contains(out, "DECOMMISSIONED") {
		t.Fatalf("decommission: %d\n%s%s", code, out, errOut)
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if sc, err := subcluster(rest[1]); err == nil && sc.State != "DECOMMISSIONED" {
			t.Fatalf("a decommissioned sub-cluster became %s", sc.State)
		}
	}
	if out, errOut, code := cli(t, "federation", "subcluster", "recommission", "sc1", "-address", rest[1]); code != 0 || !strings.Contains(out, "NEW") {
		t.Fatalf("recommission: %d\n%s%s", code, out, errOut)
	}
	waitState("sc1 RUNNING again", rest[0], "RUNNING", 30*time.Second)

	// The sub-cluster dies: LOST after subcluster_timeout.
	srv.kill()
	waitState("sc1 LOST", rest[1], "LOST", 30*time.Second)
	if _, errOut, code := cli(t, "federation", "subcluster", "forget", "sc1", "-address", rest[0]); code == 0 || !strings.Contains(errOut, "decommission it before forgetting it") {
		t.Fatalf("forget of a LOST sub-cluster: exit %d, %s", code, errOut)
	}
}
