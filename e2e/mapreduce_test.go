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
)

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
		maps := c["maps.data_local"] + c["maps.rack_local"] + c["maps.off_rack"]
		if maps != 12 || c["maps.done"] != 12 || c["reduces.done"] != 4 || c["maps.data_local"] < 1 {
			t.Errorf("%s: map counters %v: want 12 maps launched, some data-local, 12 maps and 4 reduces done", placement, c)
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
