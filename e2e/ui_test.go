package e2e

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The web UI against a real secure cluster: the token prompt, then every
// page with real data, checked against the API, following links from the
// apps list to an app, a container and its log.
func TestWebUI(t *testing.T) {
	w := startWorld(t)
	w.applyQueues(`queue "root" {
  policy = "drf"
  queue "prod" {
    weight = 3
    policy = "drf"
  }
  queue "dev" {
    weight = 1
  }
  queue "default" {}
}
`)
	// A long app in prod whose tasks say who they are, a short one in dev
	// that finishes, and opportunistic work in dev.
	long := w.submit("-name", "wordcount", "-queue", "root.prod", "-num-containers", "4", "-memory-mb", "256", "--",
		"sh", "-c", `echo "hello from $WEFT_CONTAINER_ID"; sleep 300`)
	short := w.submit("-name", "etl-nightly", "-queue", "root.dev", "-num-containers", "2", "-memory-mb", "256", "--",
		"sh", "-c", `echo "done $WEFT_CONTAINER_ID"`)
	opp := w.submit("-name", "backfill", "-queue", "root.dev", "-container-type", "OPPORTUNISTIC", "-num-containers", "3", "-memory-mb", "256", "--",
		"sh", "-c", `echo "opportunistic $WEFT_CONTAINER_ID"; sleep 300`)
	waitFor(t, 60*time.Second, "the long app's four tasks to run", func() error {
		if n := countTasks(w.containers(long), "RUNNING", ""); n != 4 {
			return fmt.Errorf("%d running", n)
		}
		return nil
	})
	if a := w.waitApp(short, 60*time.Second); a.State != "FINISHED" {
		t.Fatalf("app %s ended %s: %s", short, a.State, a.Diagnostics)
	}
	waitFor(t, 60*time.Second, "the opportunistic app's tasks to run", func() error {
		if n := countTasks(w.containers(opp), "RUNNING", "OPPORTUNISTIC"); n != 3 {
			var where []string
			for _, c := range w.containers("") {
				if c.State != "COMPLETED" {
					where = append(where, c.ID+"@"+c.NodeID+":"+c.State+"/"+c.ExecutionType)
				}
			}
			return fmt.Errorf("%d running; live containers %v", n, where)
		}
		return nil
	})

	base := w.httpURL("s1")
	api := newHTTPClient(t, w, base)
	b := startBrowser(t, base)

	t.Run("token prompt", func(t *testing.T) {
		b.t = t
		b.open("/ui/")
		waitFor(t, 20*time.Second, "the token prompt", func() error {
			open, err := eval[bool](b, `document.getElementById("token-dialog").open`)
			if err != nil || !open {
				return fmt.Errorf("dialog open %v (%v)", open, err)
			}
			return nil
		})
		why, _ := eval[string](b, `document.getElementById("token-why").textContent`)
		if !strings.Contains(why, "ACL") || !strings.Contains(why, "token") {
			t.Errorf("the prompt says %q; want it to ask for an ACL token", why)
		}
		b.shot("token-prompt", 1366, 768)
		b.run(chromedp.SendKeys(chromedp.CSS("#token-input"), api.token), chromedp.Click(chromedp.CSS("#token-save")))
		waitFor(t, 20*time.Second, "the overview with the token", func() error {
			var st struct {
				Servers []peer `json:"servers"`
			}
			api.must("/v1/status", &st)
			var want string
			for _, s := range st.Servers {
				if s.State == "leader" {
					want = s.ID
				}
			}
			leader, err := eval[string](b, `document.querySelector('[data-stat="leader"] .card-value')?.textContent || ""`)
			if err != nil {
				return err
			}
			if leader != want || want == "" {
				return fmt.Errorf("leader card %q, API's leader %q", leader, want)
			}
			return nil
		})
		if stored, _ := eval[string](b, `localStorage.getItem("weft.token") || ""`); stored != api.token {
			t.Errorf("the token was not remembered in localStorage")
		}
	})

	t.Run("overview", func(t *testing.T) {
		b.t = t
		waitFor(t, 20*time.Second, "ready nodes and app counts as the API has them", func() error {
			var st struct {
				Nodes struct {
					Ready int `json:"ready"`
				} `json:"nodes"`
				Apps map[string]int `json:"apps"`
			}
			api.must("/v1/status", &st)
			nodes, err := eval[string](b, `document.querySelector('[data-stat="nodes"] .card-value .num')?.textContent || ""`)
			if err != nil {
				return err
			}
			if nodes != fmt.Sprint(st.Nodes.Ready) {
				return fmt.Errorf("nodes card %q, API %d ready", nodes, st.Nodes.Ready)
			}
			counts, err := eval[map[string]int](b, `Object.fromEntries([...document.querySelectorAll(".state-counts li")].map(li => [li.querySelector(".badge").textContent, Number(li.querySelector(".num").textContent)]))`)
			if err != nil {
				return err
			}
			want := map[string]int{}
			for s, n := range st.Apps {
				if n > 0 {
					want[s] = n
				}
			}
			if fmt.Sprint(counts) != fmt.Sprint(want) {
				return fmt.Errorf("apps by state %v, API %v", counts, want)
			}
			return nil
		})
	})

	t.Run("nodes", func(t *testing.T) {
		b.t = t
		b.click(`nav a[data-nav="nodes"]`)
		waitFor(t, 20*time.Second, "the nodes table to match GET /v1/nodes", func() error {
			var nodes []struct {
				ID                   string `json:"id"`
				RunningGuaranteed    int    `json:"running_guaranteed"`
				RunningOpportunistic int    `json:"running_opportunistic"`
			}
			api.must("/v1/nodes", &nodes)
			var ids, want []string
			for _, n := range nodes {
				ids = append(ids, n.ID)
				want = append(want, fmt.Sprintf("%s:%d:%d", n.ID, n.RunningGuaranteed, n.RunningOpportunistic))
			}
			got, err := rows(b, "node")
			if err != nil {
				return err
			}
			if err := sameSet("node IDs", got, ids); err != nil {
				return err
			}
			// Columns 4 and 5 are running (G) and running (O).
			cells, err := eval[[]string](b, `[...document.querySelectorAll("tr[data-node]")].map(r => r.dataset.node + ":" + r.cells[3].textContent + ":" + r.cells[4].textContent)`)
			if err != nil {
				return err
			}
			return sameSet("running (G) and (O) per node", cells, want)
		})
		heads, _ := eval[[]string](b, `[...document.querySelectorAll("table.nodes th")].map(th => th.textContent)`)
		for _, h := range []string{"Running (G)", "Running (O)", "Memory (G)", "Memory (O)", "vcores (G)", "vcores (O)", "Queued"} {
			if !slices.Contains(heads, h) {
				t.Errorf("the nodes table has no %q column: %v", h, heads)
			}
		}
		b.shot("nodes", 1366, 768)
		b.shot("nodes-1920", 1920, 1080)
	})

	t.Run("a node's measured use", func(t *testing.T) {
		b.t = t
		// The node running the most: its card shows what its containers
		// were measured to use, as GET /v1/node/ID says.
		var nodes []nodeInfo
		api.must("/v1/nodes", &nodes)
		busiest := nodes[0]
		for _, n := range nodes {
			if n.RunningGuaranteed+n.RunningOpportunistic > busiest.RunningGuaranteed+busiest.RunningOpportunistic {
				busiest = n
			}
		}
		b.open("/ui/nodes/" + url.PathEscape(busiest.ID))
		waitFor(t, 20*time.Second, "the measured-use card", func() error {
			var st struct {
				Node struct {
					Measured    map[string]int64 `json:"measured"`
					Enforcement string           `json:"enforcement"`
				} `json:"node"`
			}
			api.must("/v1/node/"+url.PathEscape(busiest.ID), &st)
			text, err := eval[string](b, `(document.querySelector("[data-measured]") || {}).textContent || ""`)
			if err != nil {
				return err
			}
			if st.Node.Measured == nil || !strings.Contains(text, "In use (measured)") || !strings.Contains(text, "limits: "+st.Node.Enforcement) {
				return fmt.Errorf("card %q; the API says measured %v, limits %q", text, st.Node.Measured, st.Node.Enforcement)
			}
			return nil
		})
		b.shot("node-measured", 1366, 768)
	})

	t.Run("drain", func(t *testing.T) {
		b.t = t
		var nodes []nodeInfo
		api.must("/v1/nodes", &nodes)
		if len(nodes) == 0 {
			t.Fatal("no nodes")
		}
		uiDrain(t, b, api, nodes[len(nodes)-1].ID)
	})

	t.Run("queues", func(t *testing.T) {
		b.t = t
		b.click(`nav a[data-nav="queues"]`)
		waitFor(t, 20*time.Second, "the queue tree to match GET /v1/queues", func() error {
			var qs []queueInfo
			api.must("/v1/queues", &qs)
			var want []string
			for _, q := range qs {
				want = append(want, q.Name)
			}
			got, err := rows(b, "queue")
			if err != nil {
				return err
			}
			return sameSet("queues", got, want)
		})
		bars, err := eval[int](b, `document.querySelectorAll('tr[data-queue="root.prod"] .bar .seg.used').length`)
		if err != nil || bars != 1 {
			t.Errorf("root.prod shows %d used bars (%v); its app runs there", bars, err)
		}
		b.shot("queues", 1366, 768)
	})

	t.Run("queues vcores", func(t *testing.T) {
		b.t = t
		uiQueueToggle(t, b, api)
	})

	t.Run("apps", func(t *testing.T) {
		b.t = t
		b.click(`nav a[data-nav="apps"]`)
		waitFor(t, 20*time.Second, "the apps list to match GET /v1/apps", func() error {
			var apps []appInfo
			api.must("/v1/apps", &apps)
			var want []string
			for _, a := range apps {
				want = append(want, a.ID)
			}
			got, err := rows(b, "app")
			if err != nil {
				return err
			}
			return sameSet("apps", got, want)
		})
		// Filter by queue as a user would: the select, then the list.
		if _, err := eval[bool](b, `(() => { const s = document.getElementById("f-queue"); s.value = "root.dev"; s.dispatchEvent(new Event("change")); return true })()`); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "the apps of root.dev", func() error {
			var apps []appInfo
			api.must("/v1/apps?queue=root.dev", &apps)
			var want []string
			for _, a := range apps {
				want = append(want, a.ID)
			}
			got, err := rows(b, "app")
			if err != nil {
				return err
			}
			if err := sameSet("apps of root.dev", got, want); err != nil {
				return err
			}
			if !slices.Contains(got, short) || slices.Contains(got, long) {
				return fmt.Errorf("root.dev lists %v; want %s and not %s", got, short, long)
			}
			return nil
		})
		if p := b.path(); p != "/ui/apps?queue=root.dev" {
			t.Errorf("the filter is not in the URL: %s", p)
		}
		b.shot("apps-filtered", 1366, 768)
		b.click(`nav a[data-nav="apps"]`)
		waitFor(t, 20*time.Second, "every app listed again", func() error {
			got, err := rows(b, "app")
			if err != nil || !slices.Contains(got, long) {
				return fmt.Errorf("apps %v (%v)", got, err)
			}
			return nil
		})
		b.shot("apps", 1366, 768)
	})

	var task string
	t.Run("app page", func(t *testing.T) {
		b.t = t
		b.click(fmt.Sprintf(`tr[data-app=%q] td:first-child a`, long))
		if p := b.path(); p != "/ui/apps/"+long {
			t.Fatalf("the app link led to %s", p)
		}
		waitFor(t, 20*time.Second, "the app page to match GET /v1/app/"+long, func() error {
			var a appInfo
			api.must("/v1/app/"+long, &a)
			var cs []containerInfo
			api.must("/v1/app/"+long+"/containers", &cs)
			state, err := eval[string](b, `document.querySelector('[data-fact="state"] .badge')?.textContent || ""`)
			if err != nil {
				return err
			}
			if state != a.State {
				return fmt.Errorf("state %q, API %q", state, a.State)
			}
			var want []string
			for _, c := range cs {
				want = append(want, c.ID)
			}
			got, err := rows(b, "container")
			if err != nil {
				return err
			}
			return sameSet("the app's containers", got, want)
		})
		for _, sel := range []string{"svg.timeline", "ol.events", "pre.log"} {
			if n, _ := eval[int](b, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)); n == 0 {
				t.Errorf("the app page has no %s", sel)
			}
		}
		attempts, _ := eval[string](b, `[...document.querySelectorAll(".panel-title")].map(e => e.textContent).join("|")`)
		if !strings.Contains(attempts, "AM attempts (1)") {
			t.Errorf("panels %q: want AM attempts (1)", attempts)
		}
		// The embedded log viewer shows a task's output.
		waitFor(t, 20*time.Second, "the app page's log viewer", func() error {
			txt, err := eval[string](b, `(() => { const p = document.querySelector("pre.log"); return p ? p.dataset.container + "|" + p.textContent : "" })()`)
			if err != nil {
				return err
			}
			id, out, _ := strings.Cut(txt, "|")
			if !strings.Contains(out, "hello from "+id) {
				return fmt.Errorf("log of %s shows %q", id, out)
			}
			return nil
		})
		b.shot("app", 1366, 768)
		b.shot("app-1920", 1920, 1080)
		for _, c := range tasks(w.containers(long)) {
			if c.State == "RUNNING" {
				task = c.ID
				break
			}
		}
		if task == "" {
			t.Fatal("no running task")
		}
	})

	t.Run("container logs", func(t *testing.T) {
		b.t = t
		b.click(fmt.Sprintf(`tr[data-container=%q] td:first-child a`, task))
		if p := b.path(); p != "/ui/containers/"+task+"?app="+url.QueryEscape(long) {
			t.Fatalf("the container link led to %s", p)
		}
		waitFor(t, 20*time.Second, "the container's log", func() error {
			out, err := eval[string](b, `document.querySelector("pre.log")?.textContent || ""`)
			if err != nil {
				return err
			}
			if !strings.Contains(out, "hello from "+task) {
				return fmt.Errorf("log shows %q", out)
			}
			return nil
		})
		status, _ := eval[string](b, `document.querySelector(".log-status").textContent`)
		if !strings.Contains(status, "following") {
			t.Errorf("a running container's log should follow; status %q", status)
		}
		b.shot("container-logs", 1366, 768)
	})

	t.Run("containers", func(t *testing.T) {
		b.t = t
		b.open("/ui/containers?app=" + short)
		waitFor(t, 20*time.Second, "the containers of "+short, func() error {
			var cs []containerInfo
			api.must("/v1/containers?app="+short, &cs)
			var want []string
			for _, c := range cs {
				want = append(want, c.ID)
			}
			got, err := rows(b, "container")
			if err != nil {
				return err
			}
			if len(got) == 0 {
				return errors.New("no rows yet")
			}
			return sameSet("containers of "+short, got, want)
		})
		b.open("/ui/containers")
		waitFor(t, 20*time.Second, "every container", func() error {
			got, err := rows(b, "container")
			if err != nil || len(got) < 10 {
				return fmt.Errorf("%d rows (%v)", len(got), err)
			}
			return nil
		})
		b.shot("containers", 1366, 768)
	})

	t.Run("kill", func(t *testing.T) {
		b.t = t
		uiKill(t, b, w, api)
	})

	t.Run("overview shot", func(t *testing.T) {
		b.t = t
		b.click(`nav a[data-nav="overview"]`)
		waitFor(t, 20*time.Second, "the utilisation chart", func() error {
			n, err := eval[int](b, `document.querySelectorAll("svg.chart path.area-g").length`)
			if err != nil || n != 1 {
				return fmt.Errorf("%d chart areas (%v)", n, err)
			}
			return nil
		})
		b.shot("overview", 1366, 768)
		b.shot("overview-1920", 1920, 1080)
	})
}
