package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// peersSeenBy asks one server (a stale read: its own view) for the Raft
// configuration.
func (rn *run) peersSeenBy(server string, timeout time.Duration) ([]raftPeer, error) {
	var ps []raftPeer
	_, err := rn.cliJSON(timeout, []string{rn.c.rpcAddr(server)}, &ps, "operator", "raft", "list-peers", "-stale")
	return ps, err
}

// views asks every running server for its view, in parallel.
func (rn *run) views(timeout time.Duration) map[string][]raftPeer {
	out := map[string][]raftPeer{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range serverNames {
		if !rn.c.servers[s].running() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ps, err := rn.peersSeenBy(s, timeout)
			if err == nil {
				mu.Lock()
				out[s] = ps
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}

// agreedLeader returns the leader every running server names, provided all
// of them answered, they list three voters, and the leader names itself.
func agreedLeader(views map[string][]raftPeer, running int) (string, error) {
	if len(views) < running {
		return "", fmt.Errorf("only %d of %d running servers answered: %s", len(views), running, describeViews(views))
	}
	leader := ""
	for s, ps := range views {
		l, voters := "", 0
		for _, p := range ps {
			if p.Voter {
				voters++
			}
			if p.State == "leader" {
				l = p.ID
			}
		}
		if voters != 3 || l == "" || (leader != "" && l != leader) {
			return "", fmt.Errorf("no agreed leader: %s", describeViews(views))
		}
		leader = l
		_ = s
	}
	if _, ok := views[leader]; !ok {
		return "", fmt.Errorf("leader %s did not answer: %s", leader, describeViews(views))
	}
	return leader, nil
}

func describeViews(views map[string][]raftPeer) string {
	var keys []string
	for k := range views {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		var ps []string
		for _, p := range views[k] {
			ps = append(ps, fmt.Sprintf("%s=%s", p.ID, p.State))
		}
		parts = append(parts, fmt.Sprintf("%s sees [%s]", k, strings.Join(ps, " ")))
	}
	if len(parts) == 0 {
		return "no server answered"
	}
	return strings.Join(parts, "; ")
}

// leader waits until the running servers agree on a leader.
func (rn *run) leader(timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		running := 0
		for _, s := range serverNames {
			if rn.c.servers[s].running() {
				running++
			}
		}
		l, err := agreedLeader(rn.views(3*time.Second), running)
		if err == nil {
			return l, nil
		}
		if time.Now().After(deadline) {
			return "", err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitHealthy waits until every process runs (restarting any that exited
// by itself, which was reported when it happened), the three servers agree
// on a leader, and every node is READY.
func (rn *run) waitHealthy(timeout time.Duration) error {
	for _, p := range rn.c.all() {
		if !p.running() {
			rn.logf("  restarting %s, which exited by itself", p.name)
			if err := p.start(); err != nil {
				return err
			}
		}
	}
	deadline := time.Now().Add(timeout)
	if _, err := rn.leader(timeout); err != nil {
		return err
	}
	for {
		var nodes []nodeInfo
		_, err := rn.cliJSON(readTimeout, rn.c.serverAddrs(), &nodes, "node", "list")
		if err == nil {
			var notReady []string
			for _, n := range nodes {
				if n.Status != "READY" {
					notReady = append(notReady, n.ID+"="+n.Status)
				}
			}
			if len(nodes) == len(agentNames) && len(notReady) == 0 {
				return nil
			}
			err = fmt.Errorf("%d nodes, not READY: %v", len(nodes), notReady)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nodes: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// startCluster starts the servers and agents, waits for them, writes the
// first queue configuration and starts the monitors.
func (rn *run) startCluster() error {
	rn.procs.nsNode = map[uint64]string{}
	for _, a := range agentNames {
		rn.procs.nsNode[rn.nw.hosts[a].inode] = a
	}
	if err := os.MkdirAll(filepath.Join(rn.dir, "queues"), 0o755); err != nil {
		return err
	}
	for _, p := range rn.c.all() {
		if err := p.start(); err != nil {
			return err
		}
	}
	began := time.Now()
	if err := rn.waitHealthy(90 * time.Second); err != nil {
		return fmt.Errorf("the cluster did not come up: %v", err)
	}
	var nodes []nodeInfo
	if _, err := rn.cliJSON(readTimeout, rn.c.serverAddrs(), &nodes, "node", "list"); err != nil {
		return err
	}
	rn.nodes.setBaseline(nodes)
	deadline := time.Now().Add(60 * time.Second)
	for {
		op, err := rn.writeQueue(harnessClient, 0, rn.c.serverAddrs())
		if err != nil {
			return err
		}
		if op.ok {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the first queue configuration was not applied: %s", op.detail)
		}
	}
	l, _ := rn.leader(10 * time.Second)
	rn.logf("cluster up in %.1fs: servers %s, agents %s (each %s), leader %s",
		time.Since(began).Seconds(), strings.Join(rn.c.serverAddrs(), " "), agentList(rn),
		resources{MemoryMB: agentMemoryMB, Vcores: agentVcores}, l)
	rn.stopMon = make(chan struct{})
	rn.monitors.Add(3)
	go rn.nodeLoop()
	go rn.procLoop()
	go rn.appLoop()
	return nil
}

func agentList(rn *run) string {
	var s []string
	for _, a := range agentNames {
		s = append(s, rn.nw.hosts[a].ip)
	}
	return strings.Join(s, " ")
}
