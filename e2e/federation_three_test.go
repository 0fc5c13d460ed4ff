package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// federation is three routers and three sub-clusters, each one server and
// two agents, all real processes on loopback.
type federation struct {
	t       *testing.T
	routers []*fedRouter
	subs    map[string]*fedSub
}

type fedRouter struct {
	id, addr string
	http     string // the first router's HTTP API and UI (the others have none)
	p        *proc
}

type fedSub struct {
	id      string
	server  *proc   // the first of servers
	servers []*proc // a quorum when the test asks for one
	addr    string  // the first server's RPC address
	agents  []*proc
}

// fedApp is the part of `weft app list -json` through a router the tests
// read.
type fedApp struct {
	ID    string `json:"id"`
	Home  string `json:"home"`
	Queue string `json:"queue"`
	State string `json:"state"`
}

func startFederation(t *testing.T) *federation { return startFederationWith(t, nil) }

// startFederationWith starts the federation with quorum[sc] servers in
// sub-cluster sc (one where it names none).
func startFederationWith(t *testing.T, quorum map[string]int) *federation {
	f := &federation{t: t, subs: map[string]*fedSub{}}
	ip := "127.0.0.1"
	var serfAddrs []string
	for i := 1; i <= 3; i++ {
		rpc, serf := freePort(t, ip), freePort(t, ip)
		f.routers = append(f.routers, &fedRouter{id: fmt.Sprint("r", i), addr: net.JoinHostPort(ip, strconv.Itoa(rpc))})
		serfAddrs = append(serfAddrs, net.JoinHostPort(ip, strconv.Itoa(serf)))
	}
	var routerFlags []string
	for i, r := range f.routers {
		args := []string{"router", "-node-id", r.id, "-data-dir", filepath.Join(t.TempDir(), r.id), "-bind", ip,
			"-rpc-port", strings.Split(r.addr, ":")[1], "-serf-port", strings.Split(serfAddrs[i], ":")[1],
			"-bootstrap-expect", "3", "-subcluster-timeout", "4s", "-gpg-interval", "2s"}
		for j, a := range serfAddrs {
			if j != i {
				args = append(args, "-join", a)
			}
		}
		if i == 0 {
			r.http = net.JoinHostPort(ip, strconv.Itoa(freePort(t, ip)))
			args = append(args, "-http-port", strings.Split(r.http, ":")[1])
		}
		r.p = startProc(t, r.id, args...)
		routerFlags = append(routerFlags, "-router", r.addr)
	}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprint("sc", i)
		// Each sub-cluster on its own loopback address: 127.0.2.i for the
		// server, 127.0.2.1i and 127.0.2.2i for its agents.
		sip := fmt.Sprintf("127.0.2.%d", i)
		n := max(1, quorum[id])
		var rpcs, serfs []int
		for len(rpcs) < n {
			rpcs, serfs = append(rpcs, freePort(t, sip)), append(serfs, freePort(t, sip))
		}
		serf := serfs[0]
		sc := &fedSub{id: id, addr: net.JoinHostPort(sip, strconv.Itoa(rpcs[0]))}
		for k := range n {
			sid := fmt.Sprintf("%s-s%d", id, k+1)
			args := append([]string{"server", "-node-id", sid, "-data-dir", filepath.Join(t.TempDir(), sid),
				"-bind", sip, "-rpc-port", strconv.Itoa(rpcs[k]), "-serf-port", strconv.Itoa(serfs[k]), "-bootstrap-expect", strconv.Itoa(n),
				"-subcluster-id", id, "-subcluster-heartbeat", "500ms"}, routerFlags...)
			if k > 0 {
				args = append(args, "-join", net.JoinHostPort(sip, strconv.Itoa(serfs[0])))
			}
			sc.servers = append(sc.servers, startProc(t, sid, args...))
		}
		sc.server = sc.servers[0]
		for j := 1; j <= 2; j++ {
			aip := fmt.Sprintf("127.0.2.%d%d", j, i)
			arpc, aserf := freePort(t, aip), freePort(t, aip)
			aid := fmt.Sprintf("%s-a%d", id, j)
			sc.agents = append(sc.agents, startProc(t, aid, "agent", "-node-id", aid, "-data-dir", filepath.Join(t.TempDir(), aid),
				"-bind", aip, "-rpc-port", strconv.Itoa(arpc), "-serf-port", strconv.Itoa(aserf),
				"-join", net.JoinHostPort(sip, strconv.Itoa(serf)), "-resources", "memory_mb=2048,vcores=4", "-allow-root"))
		}
		f.subs[id] = sc
	}
	waitFor(t, 90*time.Second, "three RUNNING sub-clusters of two READY nodes at the routers", func() error {
		rows, err := f.subclusters(f.routers[2].addr)
		if err != nil {
			return err
		}
		ok := 0
		for _, r := range rows {
			if r.State == "RUNNING" && r.NodesReady == 2 {
				ok++
			}
		}
		if ok != 3 {
			return fmt.Errorf("sub-clusters %+v", rows)
		}
		return nil
	})
	return f
}

// addresses is every live router, for a client that fails over.
func (f *federation) addresses() string {
	var out []string
	for _, r := range f.routers {
		if r.p.running() {
			out = append(out, r.addr)
		}
	}
	return strings.Join(out, ",")
}

func (f *federation) subclusters(addr string) ([]subclusterRow, error) {
	var rows []subclusterRow
	err := cliJSON(f.t, &rows, "federation", "subclusters", "-address", addr)
	return rows, err
}

func (f *federation) apps(addr string) []fedApp {
	f.t.Helper()
	var apps []fedApp
	if err := cliJSON(f.t, &apps, "app", "list", "-address", addr); err != nil {
		f.t.Fatal(err)
	}
	return apps
}

// submit submits through the router at addr and returns the app's ID.
func (f *federation) submit(addr string, args ...string) string {
	f.t.Helper()
	var resp struct {
		AppID string `json:"app_id"`
	}
	if err := cliJSON(f.t, &resp, append([]string{"app", "submit", "-address", addr}, args...)...); err != nil {
		f.t.Fatal(err)
	}
	return resp.AppID
}

// homes counts apps of queue by home.
func homes(apps []fedApp, queue string) map[string]int {
	out := map[string]int{}
	for _, a := range apps {
		if a.Queue == queue {
			out[a.Home]++
		}
	}
	return out
}

// TestFederationOfThreeSubclusters is issue 13's federation with real
// processes: three routers, three sub-clusters of one server and two
// agents. A queue configuration applied through a router reaches all
// three; 300 apps submitted through the three routers to a weighted queue
// land within a few percent of the weights; an app runs through one router
// and its logs are read through another; `load` routing sends nothing to a
// full sub-cluster, and the generator weighs it down; a sub-cluster killed
// whole becomes LOST, new apps go elsewhere and its apps are reported
// unreachable, not lost; the router leader killed, another leads within
// seconds, every home mapping is intact and a client given every router
// goes on.
func TestFederationOfThreeSubclusters(t *testing.T) {
	f := startFederation(t)
	r1, r2, r3 := f.routers[0].addr, f.routers[1].addr, f.routers[2].addr
	dir := t.TempDir()
	queues := filepath.Join(dir, "queues.hcl")
	if err := os.WriteFile(queues, []byte(`queue "root" {
  queue "default" {}
  queue "hold" { max_running_apps = 0 }   # apps wait: routing is what is measured
  queue "load" { max_running_apps = 0 }
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := cli(t, "queue", "apply", queues, "-address", r2); code != 0 || !strings.Contains(out, "sc1, sc2, sc3") {
		t.Fatalf("queue apply through a router: exit %d\n%s%s", code, out, errOut)
	}
	policies := filepath.Join(dir, "fed.hcl")
	if err := os.WriteFile(policies, []byte(`queue "root.hold" {
  router  = "weighted"
  weights = { sc1 = 5, sc2 = 3, sc3 = 2 }
}
queue "root.load" { router = "load" }
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := cli(t, "federation", "policy", "apply", policies, "-address", r3); code != 0 {
		t.Fatalf("policy apply: exit %d\n%s%s", code, out, errOut)
	}

	// 300 apps through the three routers, 4 clients at once.
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 300)
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := c; i < 300; i += 4 {
				addr := f.routers[i%3].addr
				if _, errOut, code := cli(t, "app", "submit", "-address", addr, "-queue", "root.hold", "-num-containers", "1", "--", "true"); code != 0 {
					errs <- fmt.Errorf("submit %d through %s: exit %d: %s", i, addr, code, errOut)
				}
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("300 submissions through the routers in %s", time.Since(start).Round(time.Millisecond))
	got := homes(f.apps(r1), "root.hold")
	for sc, w := range map[string]float64{"sc1": 0.5, "sc2": 0.3, "sc3": 0.2} {
		if share := float64(got[sc]) / 300; math.Abs(share-w) > 0.03 {
			t.Fatalf("weighted routing of 300 apps: %v; %s has %.3f, want %.1f ± 0.03", got, sc, share, w)
		}
	}
	t.Logf("300 apps by home: %v (weights 5:3:2)", got)

	// An app that runs, submitted through one router, read through another.
	app := f.submit(r1, "-queue", "root.default", "-num-containers", "2", "--", "sh", "-c", "echo hello from $WEFT_CONTAINER_ID")
	waitFor(t, 60*time.Second, app+" FINISHED", func() error {
		var st struct {
			State string `json:"state"`
			Home  string `json:"home"`
		}
		if err := cliJSON(t, &st, "app", "status", app, "-address", r2); err != nil {
			return err
		}
		if st.State != "FINISHED" {
			return fmt.Errorf("%s at %s", st.State, st.Home)
		}
		return nil
	})
	if out, errOut, code := cli(t, "app", "logs", app, "-address", r3); code != 0 || strings.Count(out, "hello from c-") != 2 {
		t.Fatalf("app logs through a router: exit %d\n%s%s", code, out, errOut)
	}
	for _, cmd := range [][]string{{"node", "list"}, {"queue", "list"}, {"status"}, {"container", "list", "-app", app}, {"members"},
		{"operator", "raft", "list-peers"}, {"queue", "status", "root.hold"}} {
		if out, errOut, code := cli(t, append(cmd, "-address", r2)...); code != 0 || errOut != "" {
			t.Fatalf("weft %s through a router: exit %d\n%s%s", strings.Join(cmd, " "), code, out, errOut)
		}
	}

	// The HTTP API on a router: the same routes, the federation's answers.
	base := httpURL(t, f.routers[1].p)
	if code, _, body := httpGet(t, http.DefaultClient, base+"/v1/health", ""); code != 200 || !strings.Contains(string(body), `"role": "router"`) {
		t.Fatalf("a router's /v1/health: %d %s", code, body)
	}
	var viaHTTP []fedApp
	code, _, body := httpGet(t, http.DefaultClient, base+"/v1/apps?queue=root.default", "")
	if err := json.Unmarshal(body, &viaHTTP); code != 200 || err != nil || len(viaHTTP) != 1 || viaHTTP[0].ID != app || viaHTTP[0].Home == "" {
		t.Fatalf("GET /v1/apps through a router: %d %s (%v)", code, body, err)
	}

	// Kill the 300 waiting apps through the routers (their AMs' demand
	// would otherwise leave no sub-cluster any room to weigh).
	var held []string
	for _, a := range f.apps(r3) {
		if a.Queue == "root.hold" {
			held = append(held, a.ID)
		}
	}
	kills := make(chan error, len(held))
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := c; i < len(held); i += 4 {
				if out, errOut, code := cli(t, "app", "kill", held[i], "-address", f.routers[i%3].addr); code != 0 {
					kills <- fmt.Errorf("kill %s: exit %d: %s%s", held[i], code, out, errOut)
				}
			}
		}(c)
	}
	wg.Wait()
	close(kills)
	for err := range kills {
		t.Fatal(err)
	}

	// Fill sc1 with an app submitted to it directly: the generator weighs
	// it down, and load routing sends nothing there.
	filler := f.subs["sc1"].addr
	if out, errOut, code := cli(t, "app", "submit", "-address", filler, "-num-containers", "7", "-vcores", "1", "-memory-mb", "256", "--", "sleep", "600"); code != 0 {
		t.Fatalf("filling sc1: exit %d\n%s%s", code, out, errOut)
	}
	waitFor(t, 60*time.Second, "sc1 full at the routers", func() error {
		rows, err := f.subclusters(r1)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if r.ID == "sc1" && r.Used.Vcores < 8 {
				return fmt.Errorf("sc1 uses %d of %d vcores", r.Used.Vcores, r.Capacity.Vcores)
			}
		}
		return nil
	})
	waitFor(t, 30*time.Second, "generated weights that weigh the full sc1 down", func() error {
		var pl struct {
			Generated []struct {
				Queue   string            `json:"queue"`
				Weights map[string]uint32 `json:"weights"`
			} `json:"generated"`
		}
		if err := cliJSON(t, &pl, "federation", "policy", "list", "-address", r3); err != nil {
			return err
		}
		for _, g := range pl.Generated {
			if g.Queue == "" && g.Weights["sc1"] < g.Weights["sc2"] && g.Weights["sc1"] < g.Weights["sc3"] {
				return nil
			}
		}
		return fmt.Errorf("generated %+v", pl.Generated)
	})

	for i := 0; i < 6; i++ {
		f.submit(f.routers[i%3].addr, "-queue", "root.load", "-num-containers", "1", "--", "true")
	}
	if got := homes(f.apps(r2), "root.load"); got["sc1"] != 0 || got["sc2"]+got["sc3"] != 6 {
		t.Fatalf("load routing with sc1 full: %v, want none at sc1", got)
	}

	// sc2 dies whole: LOST; new apps go elsewhere; its apps unreachable.
	before := f.apps(r1)
	f.subs["sc2"].server.kill()
	for _, a := range f.subs["sc2"].agents {
		a.kill()
	}
	waitFor(t, 30*time.Second, "sc2 LOST", func() error {
		rows, err := f.subclusters(r1)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if r.ID == "sc2" && r.State != "LOST" {
				return fmt.Errorf("sc2 is %s", r.State)
			}
		}
		return nil
	})
	var lostApp string
	for _, a := range before {
		if a.Home == "sc2" {
			lostApp = a.ID
			break
		}
	}
	if _, errOut, code := cli(t, "app", "status", lostApp, "-address", r2); code != 1 || !strings.Contains(errOut, "sc2 (LOST)") {
		t.Fatalf("status of an app of the LOST sc2: exit %d, %q; want an error naming sc2 LOST", code, errOut)
	}
	if out, errOut, code := cli(t, "app", "list", "-address", r3); code != 0 || !strings.Contains(errOut, "unreachable: sc2 (LOST)") || strings.Contains(out, "\tsc2\t") {
		t.Fatalf("app list with sc2 LOST: exit %d, stderr %q", code, errOut)
	}
	for i := 0; i < 10; i++ {
		id := f.submit(f.routers[i%3].addr, "-queue", "root.hold", "-num-containers", "1", "--", "true")
		var st struct {
			Home string `json:"home"`
		}
		if err := cliJSON(t, &st, "app", "status", id, "-address", r1); err != nil || st.Home == "sc2" {
			t.Fatalf("an app submitted with sc2 LOST: home %q, %v", st.Home, err)
		}
	}

	// The router leader killed: a new one within seconds; every mapping
	// intact; a client given every router goes on.
	var peers []struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	if err := cliJSON(t, &peers, "operator", "raft", "list-peers", "-address", r1); err != nil {
		t.Fatal(err)
	}
	leader := -1
	for _, p := range peers {
		if p.State == "leader" {
			leader, _ = strconv.Atoi(strings.TrimPrefix(p.ID, "r"))
		}
	}
	if leader < 1 {
		t.Fatalf("no router leader in %+v", peers)
	}
	mapped := map[string]string{}
	for _, a := range before {
		mapped[a.ID] = a.Home
	}
	f.routers[leader-1].p.kill()
	killed := time.Now()
	id := f.submit(f.addresses(), "-queue", "root.hold", "-num-containers", "1", "--", "true")
	t.Logf("a client given every router submitted %s %s after the router leader was killed", id, time.Since(killed).Round(time.Millisecond))
	live := f.routers[leader%3].addr
	after := map[string]string{}
	var unreachable string
	out, errOut, code := cli(t, "app", "list", "-json", "-address", live)
	if code != 0 {
		t.Fatalf("app list after the router leader was killed: %d %s", code, errOut)
	}
	unreachable = errOut
	var list []fedApp
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	for _, a := range list {
		after[a.ID] = a.Home
	}
	for id, home := range mapped {
		if home == "sc2" {
			continue // LOST: not listed, named unreachable
		}
		if after[id] != home {
			t.Fatalf("app %s was at %s before the router leader was killed, now %q", id, home, after[id])
		}
	}
	if !strings.Contains(unreachable, "sc2 (LOST)") {
		t.Fatalf("after the kill the list must still name sc2 LOST: %q", unreachable)
	}
}
