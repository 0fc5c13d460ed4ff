package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// spanStatus is the part of `weft app status -json` through a router
// that shows a spanning app.
type spanStatus struct {
	State      string `json:"state"`
	Home       string `json:"home"`
	Containers struct {
		Running   int `json:"running"`
		Completed int `json:"completed"`
	} `json:"containers"`
	Spans []struct {
		Subcluster string `json:"subcluster"`
		Home       bool   `json:"home"`
		State      string `json:"state"`
		Containers struct {
			Allocated int `json:"allocated"`
			Running   int `json:"running"`
			Completed int `json:"completed"`
		} `json:"containers"`
		Unreachable string `json:"unreachable"`
	} `json:"spans"`
}

// containersBySubcluster counts an app's containers (AM excepted) by the
// sub-cluster their names through the routers carry, and checks each ran
// on a node of that sub-cluster.
func containersBySubcluster(t *testing.T, router, app string) map[string]int {
	t.Helper()
	var cs []struct {
		ID     string `json:"id"`
		NodeID string `json:"node_id"`
		IsAM   bool   `json:"is_am"`
		State  string `json:"state"`
		Reason string `json:"reason"`
	}
	if err := cliJSON(t, &cs, "container", "list", "-app", app, "-address", router); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, c := range cs {
		if c.IsAM {
			continue
		}
		sc, _, _ := strings.Cut(c.ID, ".")
		if !strings.HasPrefix(c.NodeID, sc+"-") {
			t.Fatalf("container %s of sub-cluster %s ran on node %s", c.ID, sc, c.NodeID)
		}
		out[sc]++
	}
	return out
}

func waitFinished(t *testing.T, router, app string, timeout time.Duration) spanStatus {
	t.Helper()
	var st spanStatus
	waitFor(t, timeout, app+" FINISHED", func() error {
		st = spanStatus{}
		if err := cliJSON(t, &st, "app", "status", app, "-address", router); err != nil {
			return err
		}
		switch st.State {
		case "FINISHED":
			return nil
		case "FAILED", "KILLED":
			t.Fatalf("%s ended %s: %+v", app, st.State, st)
		}
		return fmt.Errorf("%s: %+v", st.State, st.Spans)
	})
	return st
}

// TestAppsSpanSubclusters is issue 14 with real processes: three routers
// and three sub-clusters behind them, the first a quorum of three servers.
// A dshell app of 60 containers in a `locality` queue asking for the nodes
// of two sub-clusters gets its containers there — through its one
// AMRMProxy, started on the foreign agents by the AM — and finishes with
// every container exit 0; a `broadcast` app's ANY asks spread over all
// three by the weights; the home's leader killed mid-app, the app goes
// on; a secondary sub-cluster killed mid-app, its containers are reported
// lost, run again elsewhere, and every task succeeds exactly once; no
// unmanaged AM outlives its app.
func TestAppsSpanSubclusters(t *testing.T) {
	f := startFederationWith(t, map[string]int{"sc1": 3})
	r1, r2 := f.routers[0].addr, f.routers[1].addr
	dir := t.TempDir()
	queues := filepath.Join(dir, "queues.hcl")
	if err := os.WriteFile(queues, []byte(`queue "root" {
  queue "default" {}
  queue "near" {}
  queue "wide" {}
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := cli(t, "queue", "apply", queues, "-address", r1); code != 0 {
		t.Fatalf("queue apply: exit %d\n%s%s", code, out, errOut)
	}
	// Every app's home is sc1 (the router's weights); the AMRMProxy
	// spreads its containers.
	policies := filepath.Join(dir, "fed.hcl")
	if err := os.WriteFile(policies, []byte(`queue "root.near" {
  router    = "weighted"
  amrmproxy = "locality"
  weights   = { sc1 = 1, sc2 = 0, sc3 = 0 }
}
queue "root.wide" {
  router    = "weighted"
  amrmproxy = "broadcast"
  weights   = { sc1 = 1, sc2 = 1, sc3 = 1 }
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := cli(t, "federation", "policy", "apply", policies, "-address", r2); code != 0 {
		t.Fatalf("policy apply: exit %d\n%s%s", code, out, errOut)
	}

	// Locality: the nodes of sc1 and sc2, 60 containers.
	nodes := "sc1-a1,sc1-a2,sc2-a1,sc2-a2"
	start := time.Now()
	near := f.submit(r1, "-queue", "root.near", "-num-containers", "60", "-nodes", nodes, "-relax-locality=false",
		"--", "sh", "-c", "sleep 0.2")
	st := waitFinished(t, r2, near, 3*time.Minute)
	by := containersBySubcluster(t, r1, near)
	t.Logf("locality app of 60 containers on the nodes of sc1 and sc2: %v, FINISHED in %s", by, time.Since(start).Round(time.Millisecond))
	if st.Home != "sc1" || by["sc1"] == 0 || by["sc2"] == 0 || by["sc3"] != 0 || by["sc1"]+by["sc2"] < 60 {
		t.Fatalf("locality app: home %s, containers by sub-cluster %v; want some in each of sc1 and sc2, none in sc3, 60 in all", st.Home, by)
	}
	if len(st.Spans) != 2 || st.Spans[0].Subcluster != "sc1" || !st.Spans[0].Home || st.Spans[1].Subcluster != "sc2" ||
		st.Spans[1].State != "FINISHED" || st.Spans[1].Containers.Completed != by["sc2"] {
		t.Fatalf("app status through a router does not show the spans: %+v", st.Spans)
	}

	// The web UI on a router shows the app's part in each sub-cluster.
	b := startBrowser(t, "http://"+f.routers[0].http)
	b.open("/ui/apps/" + near)
	b.run(chromedp.WaitVisible(`tr[data-subcluster="sc2"]`))
	rowsShown, err := eval[[]string](b, `[...document.querySelectorAll("tr[data-subcluster]")].map((r) => r.innerText.replace(/\s+/g, " ").trim())`)
	if err != nil {
		t.Fatal(err)
	}
	if len(rowsShown) != 2 || !strings.HasPrefix(rowsShown[0], "sc1 home FINISHED") || !strings.HasPrefix(rowsShown[1], "sc2 FINISHED 0 "+strconv.Itoa(by["sc2"])) {
		t.Fatalf("the app page through a router shows sub-clusters %q, want sc1 (home) and sc2 with its %d containers done", rowsShown, by["sc2"])
	}
	b.shot("app-spanning", 1366, 768)

	// Broadcast: ANY asks spread by the weights 1:1:1.
	wide := f.submit(r1, "-queue", "root.wide", "-num-containers", "30", "--", "sh", "-c", "sleep 1")
	waitFinished(t, r1, wide, 3*time.Minute)
	by = containersBySubcluster(t, r2, wide)
	t.Logf("broadcast app of 30 containers, weights 1:1:1: %v", by)
	for _, sc := range []string{"sc1", "sc2", "sc3"} {
		if by[sc] < 5 {
			t.Fatalf("broadcast app: containers by sub-cluster %v; want every sub-cluster to have run a share", by)
		}
	}

	// Faults: every task appends its index to a file once it succeeds. The
	// home's leader is killed while the app runs, then sc2 is killed whole
	// while it runs containers of the app.
	done := filepath.Join(dir, "done")
	if err := os.Mkdir(done, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(done, 0o777)
	const tasks = 16
	faulty := f.submit(r1, "-queue", "root.near", "-num-containers", strconv.Itoa(tasks), "-nodes", nodes, "-relax-locality=false",
		"--", "sh", "-c", "sleep 4; echo $WEFT_TASK_INDEX >> "+filepath.Join(done, "tasks"))
	running := func(sc string) error {
		var st spanStatus
		if err := cliJSON(t, &st, "app", "status", faulty, "-address", r1); err != nil {
			return err
		}
		for _, p := range st.Spans {
			if p.Subcluster == sc && p.Containers.Running > 0 {
				return nil
			}
		}
		return fmt.Errorf("%s: spans %+v", st.State, st.Spans)
	}
	waitFor(t, time.Minute, faulty+" running containers in sc2", func() error { return running("sc2") })
	waitFor(t, 10*time.Second, "federation subclusters counting the unmanaged AM in sc2", func() error {
		rows, err := f.subclusters(r1)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if r.ID == "sc2" && r.UnmanagedAMs != 1 {
				return fmt.Errorf("sc2 counts %d unmanaged AMs while %s spans into it, want 1", r.UnmanagedAMs, faulty)
			}
		}
		return nil
	})
	leader := f.subLeader("sc1")
	leader.kill()
	t.Logf("killed sc1's leader %s", leader.name)
	f.subs["sc2"].server.kill()
	for _, a := range f.subs["sc2"].agents {
		a.kill()
	}
	t.Log("killed sc2 whole")
	waitFinished(t, r1, faulty, 3*time.Minute)
	ran, err := os.ReadFile(filepath.Join(done, "tasks"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(ran))
	slices.SortFunc(lines, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
	var want []string
	for i := range tasks {
		want = append(want, strconv.Itoa(i))
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("successful runs by task: %v, want each of the %d tasks exactly once", lines, tasks)
	}

	// No unmanaged AM outlives its app: sc3's (the broadcast app's) ended.
	waitFor(t, 30*time.Second, "no unmanaged AM left", func() error {
		rows, err := f.subclusters(r1)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if r.State == "RUNNING" && r.UnmanagedAMs != 0 {
				return fmt.Errorf("%s counts %d unmanaged AMs", r.ID, r.UnmanagedAMs)
			}
		}
		return nil
	})
}

// subLeader is the server leading sub-cluster sc now.
func (f *federation) subLeader(sc string) *proc {
	f.t.Helper()
	var leader *proc
	waitFor(f.t, 30*time.Second, sc+" has a leader", func() error {
		var out struct {
			Servers []struct {
				ID    string `json:"id"`
				State string `json:"state"`
			} `json:"servers"`
		}
		if err := cliJSON(f.t, &out, "status", "-address", f.subs[sc].addr); err != nil {
			return err
		}
		for _, srv := range out.Servers {
			for _, p := range f.subs[sc].servers {
				if strings.EqualFold(srv.State, "leader") && srv.ID == p.name && p.running() {
					leader = p
					return nil
				}
			}
		}
		return fmt.Errorf("servers %+v", out.Servers)
	})
	return leader
}
