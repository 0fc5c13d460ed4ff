package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// thousands is n as the UI writes it: 1,030,492.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// mrApp is what app status -json says of a MapReduce job.
type mrApp struct {
	appInfo
	Counters map[string]int64 `json:"counters"`
}

// wordcountGen builds examples/wordcount once per test.
func wordcountGen(t testing.TB) string {
	bin := filepath.Join(t.TempDir(), "wordcount")
	build := exec.Command("go", "build", "-o", bin, "github.com/weft-sched/weft/examples/wordcount")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build examples/wordcount: %v\n%s", err, out)
	}
	return bin
}

func runGen(t testing.TB, gen string, args ...string) {
	t.Helper()
	if out, err := exec.Command(gen, args...).CombinedOutput(); err != nil {
		t.Fatalf("wordcount %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestMapReduceWordCount runs the README's WordCount on three servers and
// six agents in two racks (SPEC §19): the output is exactly the corpus's
// counts; maps run where their splits are; reduces placed at their
// centers of gravity move fewer bytes across racks than reduces placed
// anywhere, on the same corpus in the same run; and when a node holding
// finished maps' output dies before the reduces fetch it, those maps run
// again and the job still produces the right output.
func TestMapReduceWordCount(t *testing.T) {
	w := startWorldOn(t, startQuorum(t), 6, nil)
	gen := wordcountGen(t)
	nodes := []string{"a1", "a2", "a3", "a4", "a5", "a6"}
	racks := []string{"/rack0", "/rack1", "/rack0", "/rack1", "/rack0", "/rack1"}
	// /rack0 holds three quarters of the data: where reduces should go.
	genArgs := []string{"-nodes", strings.Join(nodes, ","), "-racks", strings.Join(racks, ","),
		"-weights", "3,1,3,1,3,1", "-splits-per-node", "2", "-words", "4000", "-reducers", "4"}

	run := func(t *testing.T, placement string) mrApp {
		dir := filepath.Join(t.TempDir(), placement)
		runGen(t, gen, append([]string{"-dir", dir, "-reduce-placement", placement}, genArgs...)...)
		id := w.submit("-type", "mapreduce", "-spec", filepath.Join(dir, "job.hcl"))
		if a := w.waitApp(id, 2*time.Minute); a.State != "FINISHED" {
			t.Fatalf("job %s: %+v", placement, a)
		}
		runGen(t, gen, "-dir", dir, "-verify")
		var app mrApp
		if err := cliJSON(t, &app, "app", "status", id, "-address", w.any()); err != nil {
			t.Fatal(err)
		}
		c := app.Counters
		// Every node has room for its two splits' maps (and the AM): each
		// map runs where its split is.
		if c["maps.data_local"] != 12 || c["maps.rack_local"]+c["maps.off_rack"] != 0 || c["maps.done"] != 12 || c["reduces.done"] != 4 {
			t.Errorf("%s: map counters %v: want 12 maps launched data-local, 12 maps and 4 reduces done", placement, c)
		}
		t.Logf("%s: maps data-local %d, rack-local %d, off-rack %d; shuffle bytes node %d, rack %d, off-rack %d; TND %d, WTND %d; job %d ms",
			placement, c["maps.data_local"], c["maps.rack_local"], c["maps.off_rack"], c["shuffle.bytes.node_local"],
			c["shuffle.bytes.rack_local"], c["shuffle.bytes.off_rack"], c["shuffle.tnd"], c["shuffle.wtnd"], c["time.job_ms"])
		return app
	}
	shuffled := func(c map[string]int64) int64 {
		return c["shuffle.bytes.node_local"] + c["shuffle.bytes.rack_local"] + c["shuffle.bytes.off_rack"]
	}

	var cog, anywhere mrApp
	t.Run("center of gravity", func(t *testing.T) { w.t = t; cog = run(t, "center_of_gravity") })
	t.Run("anywhere", func(t *testing.T) { w.t = t; anywhere = run(t, "any") })
	t.Run("center of gravity moves fewer bytes across racks", func(t *testing.T) {
		c, a := cog.Counters, anywhere.Counters
		if shuffled(c) == 0 || shuffled(c) != shuffled(a) {
			t.Fatalf("the two runs shuffled %d and %d bytes: the same corpus must shuffle the same", shuffled(c), shuffled(a))
		}
		// Every reduce at a /rack0 node fetches only /rack1's quarter
		// across racks; a reduce anywhere fetches at least that.
		if c["shuffle.bytes.off_rack"] > a["shuffle.bytes.off_rack"] || c["shuffle.wtnd"] > a["shuffle.wtnd"] {
			t.Errorf("CoGRS: %d bytes off-rack, WTND %d; anywhere: %d, %d", c["shuffle.bytes.off_rack"], c["shuffle.wtnd"],
				a["shuffle.bytes.off_rack"], a["shuffle.wtnd"])
		}
		if frac := float64(c["shuffle.bytes.off_rack"]) / float64(shuffled(c)); frac > 0.3 {
			t.Errorf("CoGRS moved %.0f%% of the shuffle across racks; /rack1 holds a quarter of the data", 100*frac)
		}
	})

	t.Run("the web UI shows the job", func(t *testing.T) {
		w.t = t
		b := startBrowser(t, w.httpURL("s1"))
		b.open("/ui/")
		if _, err := eval[bool](b, fmt.Sprintf(`(localStorage.setItem("weft.token", %q), true)`, os.Getenv("WEFT_TOKEN"))); err != nil {
			t.Fatal(err)
		}
		b.open("/ui/apps/" + cog.ID)
		b.run(chromedp.WaitVisible(`[data-fact="map-locality"]`))
		facts, err := eval[map[string]string](b, `Object.fromEntries([...document.querySelectorAll("[data-fact]")].map((f) => [f.dataset.fact, f.querySelector("dd").innerText]))`)
		if err != nil {
			t.Fatal(err)
		}
		c := cog.Counters
		wantLocality := fmt.Sprintf("%d data-local · %d rack-local · %d off-rack", c["maps.data_local"], c["maps.rack_local"], c["maps.off_rack"])
		if facts["maps"] != "12 of 12 done" || facts["map-locality"] != wantLocality || !strings.HasPrefix(facts["shuffle"], thousands(shuffled(c))) {
			t.Errorf("the app page shows %q; want 12 maps done, locality %q, shuffle %d bytes", facts, wantLocality, shuffled(c))
		}
		rows, err := eval[int](b, `document.querySelectorAll("tr[data-counter]").length`)
		if err != nil || rows != len(c) {
			t.Errorf("the counters table has %d rows (%v); the job has %d counters", rows, err, len(c))
		}
		b.shot("app-mapreduce", 1366, 768)
	})

	t.Run("capacity queues lend idle capacity and take it back as tasks finish", func(t *testing.T) {
		w.t = t
		if out, errOut, code := cli(t, "queue", "apply", "-address", w.any(), "../examples/capacity-queues.hcl"); code != 0 {
			t.Fatalf("queue apply: %s %s", out, errOut)
		}
		defer func() { // the next job runs in root.default, which has 10% here
			if out, errOut, code := cli(t, "queue", "apply", "-address", w.any(), "../examples/queues.hcl"); code != 0 {
				t.Fatalf("queue apply: %s %s", out, errOut)
			}
		}()
		// 24 vcores in all; every container takes one. root.dev.alice's
		// capacity is 15% (3.6 vcores); alone she may borrow up to her
		// user limit, 45% (10 containers with her AM).
		dev := w.submit("-queue", "root.dev.alice", "-num-containers", "8", "--", "sleep", "3")
		peakDev, devAtArrival := 0, 0
		waitFor(t, time.Minute, "alice to borrow beyond her capacity", func() error {
			devAtArrival = countTasks(w.containers(dev), "RUNNING", "")
			peakDev = max(peakDev, devAtArrival)
			if devAtArrival < 8 {
				return fmt.Errorf("%d of alice's tasks running", devAtArrival)
			}
			return nil
		})
		// root.prod (60%) wants 20 tasks, more than the room alice leaves
		// (24 less her AM, her 8 tasks and prod's AM): it gets them all
		// only as her tasks finish and their room comes back, none
		// preempted.
		prod := w.submit("-queue", "root.prod", "-num-containers", "20", "--", "sleep", "5")
		room := 24 - 1 - devAtArrival - 1
		peakProd := 0
		waitFor(t, time.Minute, "prod to run all 20 tasks", func() error {
			peakDev = max(peakDev, countTasks(w.containers(dev), "RUNNING", ""))
			peakProd = max(peakProd, countTasks(w.containers(prod), "RUNNING", ""))
			if peakProd < 20 {
				return fmt.Errorf("%d of prod's tasks running", peakProd)
			}
			return nil
		})
		if room >= 20 {
			t.Fatalf("alice ran %d tasks when prod arrived: the room left (%d) proves nothing", devAtArrival, room)
		}
		for _, id := range []string{dev, prod} {
			if a := w.waitApp(id, 2*time.Minute); a.State != "FINISHED" {
				t.Fatalf("app %s: %+v", id, a)
			}
			for _, c := range tasks(w.containers(id)) {
				if !exitedZero(c) {
					t.Errorf("app %s: container %+v did not exit 0: capacity queues never preempt", id, c)
				}
			}
		}
		t.Logf("alice's tasks peaked at %d (capacity 3.6 vcores); prod arrived to room for %d and ran all 20 as hers finished", peakDev, room)

		// The queue page names each capacity queue's capacity and maximum.
		b := startBrowser(t, w.httpURL("s1"))
		b.open("/ui/")
		if _, err := eval[bool](b, fmt.Sprintf(`(localStorage.setItem("weft.token", %q), true)`, os.Getenv("WEFT_TOKEN"))); err != nil {
			t.Fatal(err)
		}
		b.open("/ui/queues")
		b.run(chromedp.WaitVisible(`tr[data-queue="root.dev.alice"] [data-capacity]`))
		shown, err := eval[map[string]string](b, `Object.fromEntries([...document.querySelectorAll("tr[data-queue]")].map((r) => [r.dataset.queue, r.querySelector("[data-capacity]")?.innerText || ""]))`)
		if err != nil {
			t.Fatal(err)
		}
		for q, want := range map[string]string{"root.prod": "capacity 60% · max 100%", "root.dev": "capacity 30% · max 50%",
			"root.dev.alice": "capacity 50% · max 100%", "root.default": "capacity 10% · max 100%"} {
			if !strings.HasPrefix(shown[q], want) {
				t.Errorf("the queue page shows %s as %q, want %q…", q, shown[q], want)
			}
		}
		b.shot("queues-capacity", 1366, 768)
	})

	t.Run("a lost node's finished maps run again", func(t *testing.T) {
		w.t = t
		dir := filepath.Join(t.TempDir(), "lost")
		runGen(t, gen, append([]string{"-dir", dir}, genArgs...)...)
		// Map 0 waits for the go file: the test kills a node holding
		// finished maps' output before any reduce can fetch it.
		goFile := filepath.Join(dir, "go")
		job, err := os.ReadFile(filepath.Join(dir, "job.hcl"))
		if err != nil {
			t.Fatal(err)
		}
		held := fmt.Sprintf(`map      = ["sh", "-c", "if [ \"$WEFT_TASK_INDEX\" = 0 ]; then while [ ! -e %s ]; do sleep 0.05; done; fi; exec awk '{ for (i = 1; i <= NF; i++) print $i \"\\t1\" }'"]`, goFile)
		lines := strings.Split(string(job), "\n")
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), "map ") })
		lines[i] = "  " + held
		os.WriteFile(filepath.Join(dir, "job.hcl"), []byte(strings.Join(lines, "\n")), 0o644)
		id := w.submit("-type", "mapreduce", "-spec", filepath.Join(dir, "job.hcl"))

		var victim string
		waitFor(t, time.Minute, "eleven maps done and map 0 held", func() error {
			cs := w.containers(id)
			am, done, running := "", map[string]bool{}, map[string]bool{}
			for _, c := range cs {
				switch {
				case c.IsAM:
					am = c.NodeID
				case exitedZero(c):
					done[c.NodeID] = true
				case c.State == "RUNNING":
					running[c.NodeID] = true
				}
			}
			if n := len(tasks(cs)); n != 12 || len(running) != 1 {
				return fmt.Errorf("%d task containers, running on %v", n, running)
			}
			for _, n := range nodes {
				if done[n] && !running[n] && n != am {
					victim = n
					return nil
				}
			}
			return fmt.Errorf("no node holds only finished maps: AM on %s, done on %v, running on %v", am, done, running)
		})
		t.Logf("killing %s, which holds finished maps' output", victim)
		w.agents[victim].kill()
		if err := os.WriteFile(goFile, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if a := w.waitApp(id, 3*time.Minute); a.State != "FINISHED" {
			t.Fatalf("job: %+v", a)
		}
		runGen(t, gen, "-dir", dir, "-verify")
		var app mrApp
		if err := cliJSON(t, &app, "app", "status", id, "-address", w.any()); err != nil {
			t.Fatal(err)
		}
		if app.Counters["maps.rerun_lost_output"] < 1 || app.Counters["maps.done"] != 12 {
			t.Errorf("counters %v: want the lost node's maps run again, 12 maps done", app.Counters)
		}
	})
}

// BenchmarkMapReducePlacement is the experiment of SPEC §19 (make
// mr-bench; docs/mapreduce.md): on three servers and six agents in two
// racks, /rack0 holding three quarters of the input, a WordCount and a
// sort of Zipf-skewed keys, each with reduces at their centers of gravity
// and placed anywhere (Hadoop's locality-unaware default), on the same
// corpus. It reports per job the shuffle bytes that crossed racks, the
// total WTND (bytes × network distance) and the job's time, submit to
// finish.
func BenchmarkMapReducePlacement(b *testing.B) {
	w := startWorldOn(b, startQuorum(b), 6, nil)
	gen := wordcountGen(b)
	nodes := "a1,a2,a3,a4,a5,a6"
	racks := "/rack0,/rack1,/rack0,/rack1,/rack0,/rack1"
	for _, job := range []string{"wordcount", "sort"} {
		words := "40000"
		if job == "sort" {
			words = "20000"
		}
		for _, placement := range []string{"center_of_gravity", "any"} {
			dir := filepath.Join(b.TempDir(), job+"-"+placement)
			runGen(b, gen, "-dir", dir, "-job", job, "-reduce-placement", placement, "-nodes", nodes, "-racks", racks,
				"-weights", "3,1,3,1,3,1", "-splits-per-node", "3", "-words", words, "-reducers", "6")
			b.Run(job+"/"+placement, func(b *testing.B) {
				w.t = b
				var offRack, wtnd, shuffle, ms int64
				for range b.N {
					id := w.submit("-type", "mapreduce", "-spec", filepath.Join(dir, "job.hcl"))
					if a := w.waitApp(id, 5*time.Minute); a.State != "FINISHED" {
						b.Fatalf("job %s: %+v", id, a)
					}
					var app mrApp
					if err := cliJSON(b, &app, "app", "status", id, "-address", w.any()); err != nil {
						b.Fatal(err)
					}
					runGen(b, gen, "-dir", dir, "-verify")
					c := app.Counters
					offRack += c["shuffle.bytes.off_rack"]
					wtnd += c["shuffle.wtnd"]
					shuffle += c["shuffle.bytes.node_local"] + c["shuffle.bytes.rack_local"] + c["shuffle.bytes.off_rack"]
					ms += (app.FinishedAt - app.SubmittedAt) / int64(time.Millisecond)
				}
				n := float64(b.N)
				b.ReportMetric(float64(offRack)/n, "offrack-bytes/job")
				b.ReportMetric(float64(shuffle)/n, "shuffle-bytes/job")
				b.ReportMetric(float64(offRack)/float64(shuffle)*100, "offrack-%")
				b.ReportMetric(float64(wtnd)/n, "wtnd/job")
				b.ReportMetric(float64(ms)/n, "ms/job")
			})
		}
	}
}
