package rpc

import (
	"fmt"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/testutil"
)

// A client's debt for refused bytes: nothing to wait while it owes no
// more than its allowance; beyond it, the excess at the rate; paid off at
// the rate; capped so that no read waits longer than refusalMaxWait; and
// it outlives the client's connections until it is paid, so reconnecting
// sheds nothing.
func TestRefusalDebtIsPaidOffAtTheRate(t *testing.T) {
	now := time.Unix(1000, 0)
	r := newRefusals(Limits{RefusedReadAllowance: 1 << 20, RefusedReadRate: 1 << 20})
	r.now = func() time.Time { return now }
	key := clientKey{ip: "10.0.0.1"}
	d := r.hold(key)

	if r.charge(d, 1<<20) {
		t.Fatal("a client at its allowance was said to have gone past it")
	}
	if w := d.wait(r.policy, now); w != 0 {
		t.Fatalf("a client at its allowance waits %s", w)
	}
	if !r.charge(d, 2<<20) {
		t.Fatal("going 2 MiB past the allowance was not reported")
	}
	if r.charge(d, 1<<10) {
		t.Fatal("a client already past its allowance was reported again")
	}
	if w := d.wait(r.policy, now); w < 2*time.Second || w > 2*time.Second+10*time.Millisecond {
		t.Fatalf("2 MiB past the allowance at 1 MiB/s waits %s, want 2s", w)
	}
	now = now.Add(1500 * time.Millisecond)
	if w := d.wait(r.policy, now); w < 500*time.Millisecond || w > 510*time.Millisecond {
		t.Fatalf("1.5 s later it waits %s, want 0.5s", w)
	}
	// A flood owes at most its allowance and refusalMaxWait at the rate.
	r.charge(d, 1<<30)
	if w := d.wait(r.policy, now); w != refusalMaxWait {
		t.Fatalf("after a 1 GiB refusal it waits %s, want the cap %s", w, refusalMaxWait)
	}

	// Its connection closes with the debt unpaid: a new one takes it up.
	r.letGo(key, d)
	if again := r.hold(key); again != d {
		t.Fatal("a reconnecting client shed its debt")
	}
	r.letGo(key, d)
	// Paid off: its last connection gone, nothing is kept of it.
	now = now.Add(time.Minute)
	other := r.hold(clientKey{ip: "10.0.0.2"})
	r.letGo(clientKey{ip: "10.0.0.2"}, other)
	if len(r.debts) != 1 {
		t.Fatalf("%d debts kept, want the first client's alone (it was paid while no connection held it, so it goes at the next sweep)", len(r.debts))
	}
	for i := range refusalSweepAt {
		r.hold(clientKey{ip: fmt.Sprintf("10.1.%d.%d", i/256, i%256)})
	}
	if _, ok := r.debts[key]; ok {
		t.Fatal("a paid-off debt with no connection survived a sweep")
	}
}

// An anonymous caller streaming a body refused as too large is read past
// at the refusal rate once it has had its allowance: the bytes the
// listener has read past never exceed the allowance and the rate times
// the time since the flood began (with a read buffer's worth of slack),
// where an unthrottled reader takes the whole 8 MiB in milliseconds.
// Another client is served meanwhile.
func TestARefusedFloodIsReadAtTheRefusalRate(t *testing.T) {
	const allowance, rate = 1 << 20, 1 << 20
	bs := startBudgetServer(t, OptionalClientCert, Limits{RefusedReadAllowance: allowance, RefusedReadRate: rate}, nil)
	conn, err := bs.dialTLS(t, "127.0.0.2", bs.pki.Anonymous(), ConnRPC)
	if err != nil {
		t.Fatal(err)
	}
	const declared = 8<<20 - 64
	start := time.Now()
	go func() {
		conn.Write(append(requestHeader("Work.Big", ""), blobStart(declared)...))
		chunk := make([]byte, 64<<10)
		for sent := 0; sent < declared; sent += len(chunk) {
			if _, err := conn.Write(chunk[:min(len(chunk), declared-sent)]); err != nil {
				return
			}
		}
	}()
	const slack = 256 << 10
	testutil.WaitFor(t, 10*time.Second, func() bool { return bs.lis.mem.refused.read.Load() > allowance })
	for i := 0; i < 20; i++ {
		read := bs.lis.mem.refused.read.Load()
		elapsed := time.Since(start)
		if bound := allowance + int64(rate*elapsed.Seconds()) + slack; read > bound {
			t.Fatalf("%s into the flood the listener had read past %d KiB of it, over the allowance and the rate (%d KiB)", elapsed, read>>10, bound>>10)
		}
		if err := bs.served(t, "127.0.0.3", bs.pki.Anonymous()); err != nil {
			t.Fatalf("another client during the flood: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // pacing the samples, not waiting on anything
	}
	if read := bs.lis.mem.refused.read.Load(); read >= declared {
		t.Fatalf("the whole refused body (%d KiB) was read in %s", read>>10, time.Since(start))
	}
}
