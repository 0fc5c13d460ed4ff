package e2e

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The parts of TestWebUI that act on the cluster through the UI (drain a
// node, kill an app) or switch a view (the queues' vcores toggle), each
// checked against the API.

// nodeDrainStatus is the part of GET /v1/node/{id} the drain checks read.
type nodeDrainStatus struct {
	Node struct {
		ID            string `json:"id"`
		Status        string `json:"status"`
		DrainDeadline int64  `json:"drain_deadline"`
	} `json:"node"`
}

// askDialog is the UI's question before a change (kill, drain).
const askDialog = `dialog.confirm-dialog[open]`

// dialogOpen reports whether the UI's question is on screen.
func dialogOpen(b *browser) bool {
	open, err := eval[bool](b, fmt.Sprintf(`!!document.querySelector(%q)`, askDialog))
	if err != nil {
		b.t.Fatal(err)
	}
	return open
}

// uiDrain drains node from the nodes page with a 15-minute deadline, checks
// the page and GET /v1/node/{id} agree it is DRAINING until that deadline,
// then stops the drain and checks both say READY again.
func uiDrain(t *testing.T, b *browser, api *httpClient, node string) {
	b.click(`nav a[data-nav="nodes"]`)
	b.click(fmt.Sprintf(`button[data-drain=%q]`, node))
	b.run(chromedp.WaitVisible(chromedp.CSS(askDialog)))
	if _, err := eval[bool](b, fmt.Sprintf(`(() => { const s = document.querySelector('%s select[name="deadline"]'); s.value = "15m"; return true })()`, askDialog)); err != nil {
		t.Fatal(err)
	}
	b.shot("node-drain-dialog", 1366, 768)
	b.click(askDialog + ` button[data-confirm]`)

	var deadline int64
	waitFor(t, 20*time.Second, node+" DRAINING in the API and on the page", func() error {
		var st nodeDrainStatus
		api.must("/v1/node/"+node, &st)
		if st.Node.Status != "DRAINING" {
			return fmt.Errorf("the API says %s", st.Node.Status)
		}
		deadline = st.Node.DrainDeadline
		got, err := eval[string](b, fmt.Sprintf(`(() => {
			const r = document.querySelector('tr[data-node=%q]');
			if (!r) return "";
			const d = r.querySelector("[data-deadline]");
			return r.querySelector(".badge").textContent + "|" + (d ? d.dataset.deadline + "|" + d.textContent : "no deadline");
		})()`, node))
		if err != nil {
			return err
		}
		// The page shows the deadline in ms (a JavaScript number cannot
		// hold every Unix nanosecond exactly): within a millisecond.
		var badge, text string
		var ms int64
		if parts := strings.SplitN(got, "|", 3); len(parts) == 3 {
			badge, text = parts[0], parts[2]
			ms, _ = strconv.ParseInt(parts[1], 10, 64)
		}
		if diff := ms - deadline/int64(time.Millisecond); badge != "DRAINING" || diff < -1 || diff > 1 || !strings.HasPrefix(text, "deadline in ") {
			return fmt.Errorf("the row shows %q, want DRAINING with deadline %d ms and \"deadline in …\"", got, deadline/int64(time.Millisecond))
		}
		return nil
	})
	// The deadline is the one chosen in the dialog, not the default hour.
	if left := time.Until(time.Unix(0, deadline)); left <= 5*time.Minute || left > 16*time.Minute {
		t.Errorf("drain deadline %s from now; the dialog asked for 15m", left.Round(time.Second))
	}
	if n, _ := eval[string](b, `document.querySelector(".note-ok")?.textContent || ""`); !strings.Contains(n, node+" is draining") {
		t.Errorf("after draining the page says %q", n)
	}
	b.shot("nodes-draining", 1366, 768)
	b.shot("nodes-draining-1920", 1920, 1080)

	b.click(fmt.Sprintf(`button[data-undrain=%q]`, node))
	waitFor(t, 20*time.Second, node+" READY again in the API and on the page", func() error {
		var st nodeDrainStatus
		api.must("/v1/node/"+node, &st)
		if st.Node.Status != "READY" || st.Node.DrainDeadline != 0 {
			return fmt.Errorf("the API says %s, deadline %d", st.Node.Status, st.Node.DrainDeadline)
		}
		got, err := eval[string](b, fmt.Sprintf(`(() => {
			const r = document.querySelector('tr[data-node=%q]');
			if (!r) return "";
			return r.querySelector(".badge").textContent + "|" + !!r.querySelector("[data-deadline]") + "|" + !!r.querySelector("button[data-drain]");
		})()`, node))
		if err != nil {
			return err
		}
		if got != "READY|false|true" {
			return fmt.Errorf("the row shows state|deadline shown|drain button %q", got)
		}
		return nil
	})
}

// uiQueueToggle switches the queue tree to vcores, checks each queue's
// used vcores against GET /v1/queues and that the choice survives a
// reload (it is in the URL), then switches back to memory.
func uiQueueToggle(t *testing.T, b *browser, api *httpClient) {
	heading := func() string {
		h, _ := eval[string](b, `document.querySelector("table.queues th:nth-child(5)")?.textContent || ""`)
		return h
	}
	check := func() error {
		if h := heading(); h != "vcores: used vs fair share" {
			return fmt.Errorf("the bar column is %q", h)
		}
		var qs []struct {
			Name string           `json:"name"`
			Used map[string]int64 `json:"used"`
		}
		api.must("/v1/queues", &qs)
		got, err := eval[map[string]string](b, `Object.fromEntries([...document.querySelectorAll("tr[data-queue]")].map(r => [r.dataset.queue, r.querySelector(".qnums b").textContent]))`)
		if err != nil {
			return err
		}
		want := map[string]string{}
		for _, q := range qs {
			want[q.Name] = fmt.Sprint(q.Used["vcores"])
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("used vcores per queue: the page shows %v, the API %v", got, want)
		}
		return nil
	}
	b.click(`.seg-toggle button[data-dim="vcores"]`)
	waitFor(t, 20*time.Second, "the queue tree in vcores", check)
	if p := b.path(); p != "/ui/queues?dim=vcores" {
		t.Errorf("the vcores view is not in the URL: %s", p)
	}
	if on, _ := eval[string](b, `document.querySelector('.seg-toggle button[data-dim="vcores"]').getAttribute("aria-pressed")`); on != "true" {
		t.Errorf("the vcores button is not shown pressed (aria-pressed %q)", on)
	}
	b.open("/ui/queues?dim=vcores")
	waitFor(t, 20*time.Second, "the vcores view after a reload", check)
	b.shot("queues-vcores", 1366, 768)
	b.click(`.seg-toggle button[data-dim="memory"]`)
	waitFor(t, 20*time.Second, "the queue tree in memory again", func() error {
		if h := heading(); h != "Memory: used vs fair share" {
			return fmt.Errorf("the bar column is %q", h)
		}
		return nil
	})
	if p := b.path(); p != "/ui/queues" {
		t.Errorf("back on memory the URL is %s", p)
	}
}

// uiKill runs a long app, opens its page, cancels the kill question (the
// app must keep running), then kills it and checks GET /v1/app/{id} and
// the page both say KILLED, with no container left running.
func uiKill(t *testing.T, b *browser, w *world, api *httpClient) {
	id := w.submit("-name", "adhoc-query", "-queue", "root.default", "-num-containers", "1", "-memory-mb", "256", "--", "sh", "-c", "sleep 300")
	waitFor(t, 60*time.Second, id+"'s task to run", func() error {
		if n := countTasks(w.containers(id), "RUNNING", ""); n != 1 {
			return fmt.Errorf("%d running", n)
		}
		return nil
	})
	b.open("/ui/apps/" + id)
	kill := fmt.Sprintf(`button[data-kill=%q]`, id)
	b.click(kill)
	b.run(chromedp.WaitVisible(chromedp.CSS(askDialog)))
	b.click(askDialog + ` button[data-cancel]`)
	waitFor(t, 10*time.Second, "the question to close", func() error {
		if dialogOpen(b) {
			return errors.New("still open")
		}
		return nil
	})
	var a appInfo
	api.must("/v1/app/"+id, &a)
	if a.State != "RUNNING" {
		t.Fatalf("after Cancel the app is %s", a.State)
	}

	b.click(kill)
	b.run(chromedp.WaitVisible(chromedp.CSS(askDialog)))
	if q, _ := eval[string](b, fmt.Sprintf(`document.querySelector(%q).querySelector("h2").textContent`, askDialog)); !strings.Contains(q, "Kill "+id) {
		t.Errorf("the question reads %q", q)
	}
	b.shot("app-kill-dialog", 1366, 768)
	b.click(askDialog + ` button[data-confirm]`)
	waitFor(t, 30*time.Second, id+" KILLED in the API and on the page", func() error {
		api.must("/v1/app/"+id, &a)
		if a.State != "KILLED" {
			return fmt.Errorf("the API says %s", a.State)
		}
		var cs []containerInfo
		api.must("/v1/app/"+id+"/containers", &cs)
		for _, c := range cs {
			if c.State == "RUNNING" {
				return fmt.Errorf("%s still runs", c.ID)
			}
		}
		got, err := eval[string](b, fmt.Sprintf(`(document.querySelector('[data-fact="state"] .badge')?.textContent || "") + "|" + !!document.querySelector(%q)`, kill))
		if err != nil {
			return err
		}
		if got != "KILLED|false" {
			return fmt.Errorf("the page shows state|kill button %q", got)
		}
		return nil
	})
	b.shot("app-killed", 1366, 768)
}
