package e2e

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Lent capacity comes back to a capacity queue whose containers are
// larger than any slot that frees: root.small's 1-core tasks fill the
// cluster (four nodes of 4 cores) with a backlog behind them; root.big
// then asks for its half as two 4-core containers. Without node
// reservations small would take each core as it freed and big would wait
// for small's whole backlog; with them big reserves two nodes, the tasks
// there end within a task length, and big runs while small still has work
// waiting. `weft node list` shows the reservations meanwhile.
func TestLentCapacityComesBackToLargeContainers(t *testing.T) {
	w := startWorldOn(t, startQuorum(t), 4, nil)
	w.t = t
	w.applyQueues(`queue "root" {
  type = "capacity"
  queue "big" {
    capacity          = 50
    user_limit_factor = -1
  }
  queue "small" {
    capacity          = 50
    user_limit_factor = -1
  }
}
`)
	const taskLength = 8 * time.Second
	small := w.submit("-queue", "root.small", "-num-containers", "60", "--", "sleep", "8")
	waitFor(t, time.Minute, "small's tasks to fill the cluster", func() error {
		if n := countTasks(w.containers(small), "RUNNING", ""); n < 15 {
			return fmt.Errorf("%d of small's tasks running, want 15 (16 cores less its AM)", n)
		}
		return nil
	})
	// The web UI's nodes page, open before big arrives, shows its
	// reservations as they are made.
	b := startBrowser(t, w.httpURL("s1"))
	b.open("/ui/")
	if _, err := eval[bool](b, fmt.Sprintf(`(localStorage.setItem("weft.token", %q), true)`, os.Getenv("WEFT_TOKEN"))); err != nil {
		t.Fatal(err)
	}
	b.open("/ui/nodes")
	b.run(chromedp.WaitVisible(`tr[data-node="a1"]`))
	// A reservation lasts until its task lands, which may be before the
	// screenshot is taken: 'weft node list' is watched from before big
	// arrives, each call as soon as the last returned.
	watched := make(chan map[string]map[string]bool, 1)
	stopWatch := make(chan struct{})
	go func() {
		seen := map[string]map[string]bool{} // app → nodes reserved for it
		for {
			select {
			case <-stopWatch:
				watched <- seen
				return
			default:
			}
			for _, n := range w.reservations() {
				if r := n.Reservation; r != nil {
					if seen[r.AppID] == nil {
						seen[r.AppID] = map[string]bool{}
					}
					seen[r.AppID][n.ID] = true
				}
			}
		}
	}()
	big := w.submit("-queue", "root.big", "-num-containers", "2", "-vcores", "4", "-memory-mb", "256", "--", "sleep", "3")
	b.run(chromedp.WaitVisible(`[data-reserved-for="` + big + `"]`))
	b.shot("nodes-reserved", 1366, 560)
	var amStarted int64
	reservedSeen := map[string]bool{}
	waitFor(t, 2*time.Minute, "big's two 4-core tasks to run", func() error {
		for _, n := range w.reservations() {
			if n.Reservation != nil && n.Reservation.AppID == big {
				reservedSeen[n.ID] = true
			}
		}
		var started []int64
		for _, c := range w.containers(big) {
			switch {
			case c.IsAM:
				amStarted = c.StartedAt
			case c.StartedAt > 0:
				started = append(started, c.StartedAt)
			}
		}
		if len(started) < 2 {
			return fmt.Errorf("%d of big's tasks started", len(started))
		}
		took := time.Duration(slices.Max(started) - amStarted)
		done := 0
		for _, c := range tasks(w.containers(small)) {
			if c.State == "COMPLETED" || c.State == "RUNNING" {
				done++
			}
		}
		if done >= 60 {
			t.Fatalf("big's tasks started only once small's backlog had all started: the lent capacity did not come back")
		}
		t.Logf("big's tasks ran %s after its AM started (%.1f task lengths), with %d of small's 60 tasks started; nodes reserved: %v",
			took.Round(100*time.Millisecond), float64(took)/float64(taskLength), done, reservedSeen)
		if took > 2*taskLength {
			t.Errorf("big waited %s for its half, more than two task lengths (%s)", took, 2*taskLength)
		}
		return nil
	})
	close(stopWatch)
	for node := range (<-watched)[big] {
		reservedSeen[node] = true
	}
	if len(reservedSeen) == 0 {
		t.Error("no reservation of big's was ever seen in 'weft node list'")
	}
	for _, id := range []string{big, small} {
		if a := w.waitApp(id, 3*time.Minute); a.State != "FINISHED" {
			t.Fatalf("app %s: %+v", id, a)
		}
		for _, c := range tasks(w.containers(id)) {
			if !exitedZero(c) {
				t.Errorf("app %s: container %+v did not exit 0: capacity queues never preempt", id, c)
			}
		}
	}
	for _, n := range w.reservations() {
		if n.Reservation != nil {
			t.Errorf("node %s still reserved after both apps ended: %+v", n.ID, n.Reservation)
		}
	}
}

type nodeReservation struct {
	ID          string `json:"id"`
	Reservation *struct {
		AppID string `json:"app_id"`
	} `json:"reservation"`
}

func (w *world) reservations() []nodeReservation {
	var ns []nodeReservation
	cliJSON(w.t, &ns, "node", "list", "-address", w.any())
	return ns
}
