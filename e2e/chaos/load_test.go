package chaos

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// The load of a round, from the root namespace through the CLI with
// WEFT_ADDR listing every server (in a seeded order per op): two
// submitters keeping about maxInFlight apps in flight, two writers of the
// root.chaos queue's weight (a distinct value each time) and two readers of
// it (consistent reads).
const (
	submitters  = 2
	writers     = 2
	readers     = 2
	maxInFlight = 4
	// The register's clients in the history: writers 0…, readers after
	// them, the harness's own reads and writes last.
	harnessClient = writers + readers
)

// opCounts are a round's op figures.
type opCounts struct {
	submitOK, submitFail  atomic.Int64
	writeOK, writeUnknown atomic.Int64
	readOK, readFail      atomic.Int64
}

// loadGen is a round's load, running until stop.
type loadGen struct {
	rn     *run
	round  int
	stop   chan struct{}
	wg     sync.WaitGroup
	counts *opCounts
}

func (ld *loadGen) stopped() bool {
	select {
	case <-ld.stop:
		return true
	default:
		return false
	}
}

// startLoad starts a round's load; each worker's random stream comes from
// the seed and the round of the schedule.
func (rn *run) startLoad(round, planIndex int) *loadGen {
	ld := &loadGen{rn: rn, round: round, stop: make(chan struct{}), counts: &opCounts{}}
	for w := 0; w < submitters; w++ {
		ld.wg.Add(1)
		go ld.submitter(w, rngFor(rn.cfg.seed, planIndex, 100+w))
	}
	for w := 0; w < writers; w++ {
		ld.wg.Add(1)
		go ld.writer(w, rngFor(rn.cfg.seed, planIndex, 200+w))
	}
	for w := 0; w < readers; w++ {
		ld.wg.Add(1)
		go ld.reader(writers+w, rngFor(rn.cfg.seed, planIndex, 300+w))
	}
	return ld
}

// finish stops the load and waits for the ops under way to return.
func (ld *loadGen) finish() {
	close(ld.stop)
	ld.wg.Wait()
}

// queueConfig is the configuration every write applies: only root.chaos's
// weight changes.
func queueConfig(weight int64) string {
	return fmt.Sprintf(`queue "root" {
  queue "default" {}
  queue "chaos" {
    weight = %d
  }
}
`, weight)
}

// writeQueue applies a configuration with a new weight for root.chaos and
// records the op: acknowledged, or of unknown outcome.
func (rn *run) writeQueue(client, round int, addrs []string) (queueOp, error) {
	v := rn.hist.nextValue()
	path := filepath.Join(rn.dir, "queues", fmt.Sprintf("w%06d.hcl", v))
	if err := os.WriteFile(path, []byte(queueConfig(v)), 0o644); err != nil {
		return queueOp{}, err
	}
	res := rn.cli(writeTimeout, addrs, "queue", "apply", "-json", path)
	op := queueOp{client: client, round: round, write: true, value: v, call: res.start, ret: res.end, ok: res.ok(),
		detail: fmt.Sprintf("via %s: %s", res.addrs, res.errLine())}
	rn.hist.add(op)
	return op, nil
}

// readQueue reads root.chaos's weight (a consistent read) and records it
// if it answered.
func (rn *run) readQueue(client, round int, addrs []string, stale bool) (queueOp, error) {
	args := []string{"queue", "status", "root.chaos"}
	if stale {
		args = append(args, "-stale")
	}
	var q queueInfo
	res, err := rn.cliJSON(readTimeout, addrs, &q, args...)
	if err != nil {
		return queueOp{}, err
	}
	op := queueOp{client: client, round: round, value: int64(q.Weight), call: res.start, ret: res.end, ok: true,
		detail: "via " + res.addrs}
	if !stale {
		rn.hist.add(op)
	}
	return op, nil
}

func (ld *loadGen) writer(client int, rng *rand.Rand) {
	defer ld.wg.Done()
	for !ld.stopped() {
		op, err := ld.rn.writeQueue(client, ld.round, ld.rn.shuffled(rng))
		switch {
		case err != nil:
			ld.rn.fail("harness", "queue write: %v", err)
			return
		case op.ok:
			ld.counts.writeOK.Add(1)
		default:
			ld.counts.writeUnknown.Add(1)
		}
		time.Sleep(time.Duration(200+rng.IntN(400)) * time.Millisecond)
	}
}

func (ld *loadGen) reader(client int, rng *rand.Rand) {
	defer ld.wg.Done()
	for !ld.stopped() {
		if _, err := ld.rn.readQueue(client, ld.round, ld.rn.shuffled(rng), false); err != nil {
			ld.counts.readFail.Add(1)
		} else {
			ld.counts.readOK.Add(1)
		}
		time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
