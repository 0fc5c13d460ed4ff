package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/scheduler"
)

// request applies body under a request ID, as a server proposes a client's
// write, at leader time now.
func (h *harness) request(id string, now time.Time, mt MessageType, body any) any {
	h.t.Helper()
	data, err := EncodeRequest(id, now.UnixNano(), mt, body)
	if err != nil {
		h.t.Fatal(err)
	}
	h.index++
	res := h.f.Apply(&raft.Log{Index: h.index, Term: 1, Type: raft.LogCommand, Data: data})
	checkInvariants(h.t, h.f.State())
	return res
}

func submitSpec(name string) *AppSubmitRequest {
	return &AppSubmitRequest{Spec: scheduler.AppSpec{Name: name, User: "u",
		DShell: scheduler.DShell{NumContainers: 1, Command: []string{"true"}, Resources: small}}, Now: 1}
}

func TestRetriedRequestIsAppliedOnceAndGetsTheFirstAnswer(t *testing.T) {
	h := newHarness(t)
	t0 := time.Unix(1000, 0)
	first := h.request("r1", t0, AppSubmitType, submitSpec("a"))
	id, ok := first.(string)
	if !ok {
		t.Fatalf("submit answered %v", first)
	}
	// The retry comes later (a broken connection, another server): same
	// answer, no second app.
	again := h.request("r1", t0.Add(time.Minute), AppSubmitType, submitSpec("a"))
	if r, ok := again.(*Replay); !ok || r.Result != id || r.Index != 1 {
		t.Fatalf("retry answered %#v, want the first answer %s at index 1", again, id)
	}
	if n := len(h.f.State().Apps()); n != 1 {
		t.Fatalf("%d apps after a retried submit, want 1", n)
	}
	// Another request ID is another write.
	if other := h.request("r2", t0.Add(time.Minute), AppSubmitType, submitSpec("a")); other == id {
		t.Fatalf("a new request ID got the old answer")
	}
	// A rejection is remembered too, with its kind.
	h.request("r3", t0, AppFinishType, &AppFinishRequest{AppID: "app-404", State: scheduler.AppKilled})
	res := h.request("r3", t0, AppFinishType, &AppFinishRequest{AppID: "app-404", State: scheduler.AppKilled})
	if r, ok := res.(*Replay); !ok {
		t.Fatalf("retried rejection answered %#v", res)
	} else if err, ok := r.Result.(error); !ok || !errors.Is(err, ErrNotFound) || err.Error() != "app app-404 not found" {
		t.Fatalf("retried rejection answered %v", r.Result)
	}
}

func TestRetryAfterTheWindowIsAppliedAgain(t *testing.T) {
	h := newHarness(t)
	t0 := time.Unix(1000, 0)
	h.request("r1", t0, AppSubmitType, submitSpec("a"))
	h.request("r2", t0.Add(RequestWindow), AppSubmitType, submitSpec("b"))
	if _, ok := h.f.State().Request("r1"); !ok {
		t.Fatalf("r1 forgotten at exactly the window")
	}
	h.request("r3", t0.Add(RequestWindow+time.Nanosecond), AppSubmitType, submitSpec("c"))
	if _, ok := h.f.State().Request("r1"); ok {
		t.Fatalf("r1 remembered past the window")
	}
	if _, ok := h.f.State().Request("r2"); !ok || h.f.State().NumRequests() != 2 {
		t.Fatalf("newer records forgotten: %d remembered", h.f.State().NumRequests())
	}
}

func TestRequestRecordsAreBoundedInNumber(t *testing.T) {
	defer func(n int) { maxRequestRecords = n }(maxRequestRecords)
	maxRequestRecords = 100
	h := newHarness(t)
	t0 := time.Unix(1000, 0)
	kill := &AppFinishRequest{AppID: "app-404", State: scheduler.AppKilled}
	for i := 0; i < maxRequestRecords+5; i++ {
		h.index++
		data, _ := EncodeRequest(fmt.Sprintf("r%d", i), t0.UnixNano(), AppFinishType, kill)
		h.f.Apply(&raft.Log{Index: h.index, Term: 1, Type: raft.LogCommand, Data: data})
	}
	st := h.f.State()
	if st.NumRequests() != maxRequestRecords {
		t.Fatalf("%d records remembered, want %d", st.NumRequests(), maxRequestRecords)
	}
	if _, ok := st.Request("r4"); ok {
		t.Fatalf("the oldest records were not the ones forgotten")
	}
	if _, ok := st.Request("r5"); !ok {
		t.Fatalf("r5 forgotten, though within the bound")
	}
}

func TestRequestRecordsSurviveASnapshot(t *testing.T) {
	h := newHarness(t)
	t0 := time.Unix(1000, 0)
	id := h.request("r1", t0, AppSubmitType, submitSpec("a")).(string)
	data := persist(t, h.f)
	g := New(nil)
	if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if g.State().NumRequests() != 1 {
		t.Fatalf("restored %d request records, want 1", g.State().NumRequests())
	}
	// A server restored from the snapshot answers a retry as the others do.
	for _, f := range []*FSM{h.f, g} {
		buf, _ := EncodeRequest("r1", t0.UnixNano(), AppSubmitType, submitSpec("a"))
		if res, ok := f.Apply(&raft.Log{Index: h.index + 1, Term: 1, Type: raft.LogCommand, Data: buf}).(*Replay); !ok || res.Result != id {
			t.Fatalf("retry after restore answered %#v, want %s", res, id)
		}
	}
	if !bytes.Equal(persist(t, h.f), persist(t, g)) {
		t.Fatalf("the two servers' states differ after the retry")
	}
}
