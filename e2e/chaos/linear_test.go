package chaos

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// The queue register: root.chaos's weight, written by `weft queue apply`
// with a distinct value each time and read by `weft queue status`
// (consistent reads). Its history must be linearizable.

// queueOp is one op of the history.
type queueOp struct {
	client int
	round  int
	write  bool
	value  int64 // written, or read
	call   int64
	ret    int64
	ok     bool // a write: acknowledged (else its outcome is unknown)
	detail string
}

func (o queueOp) String() string {
	kind, v := "read", fmt.Sprintf("→ %d", o.value)
	if o.write {
		kind, v = "write", fmt.Sprintf("%d", o.value)
		if !o.ok {
			v += " (outcome unknown)"
		}
	}
	return fmt.Sprintf("client %d %s %s [%.3fs, %.3fs] %s", o.client, kind, v, float64(o.call)/1e9, float64(o.ret)/1e9, o.detail)
}

// history is the register's ops, in the order they returned.
type history struct {
	mu   sync.Mutex
	next int64
	ops  []queueOp
}

func newHistory() *history { return &history{next: 1} }

// nextValue returns a weight no write has used.
func (h *history) nextValue() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	return h.next
}

func (h *history) add(op queueOp) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// select returns the ops of the given rounds (all if rounds is nil).
func (h *history) selectRounds(rounds map[int]bool) []queueOp {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []queueOp
	for _, o := range h.ops {
		if rounds == nil || rounds[o.round] || (o.write && !o.ok) {
			out = append(out, o)
		}
	}
	return out
}

// regInput is a register op for porcupine.
type regInput struct {
	write bool
	value int64
}

// unknownState is the register before anything is known of it: a read may
// return anything (used for windows of the history that start mid-run).
const unknownState = int64(-1)

var registerModel = porcupine.Model{
	Init: func() any { return unknownState },
	Step: func(state, input, output any) (bool, any) {
		in, s := input.(regInput), state.(int64)
		if in.write {
			return true, in.value
		}
		got := output.(int64)
		if s == unknownState {
			return true, got
		}
		return got == s, s
	},
	DescribeOperation: func(input, output any) string {
		in := input.(regInput)
		if in.write {
			return fmt.Sprintf("write(%d)", in.value)
		}
		return fmt.Sprintf("read() → %d", output.(int64))
	},
	DescribeState: func(state any) string {
		if state.(int64) == unknownState {
			return "?"
		}
		return fmt.Sprint(state.(int64))
	},
}

// toPorcupine turns ops into porcupine operations. A write whose outcome
// is unknown (it failed or timed out) may take effect at any time after it
// was called, or never: it gets an open end (Return = +∞). One whose value
// no read in ops returned can always be linearized last, after every other
// op, where it changes nothing any read saw, so it is left out; this keeps
// the search small however many writes time out.
func toPorcupine(ops []queueOp) ([]porcupine.Operation, []queueOp) {
	readValues := map[int64]bool{}
	for _, o := range ops {
		if !o.write {
			readValues[o.value] = true
		}
	}
	var out []porcupine.Operation
	var kept []queueOp
	for _, o := range ops {
		ret := o.ret
		if o.write && !o.ok {
			if !readValues[o.value] {
				continue
			}
			ret = math.MaxInt64
		}
		var output any = int64(0)
		if !o.write {
			output = o.value
		}
		out = append(out, porcupine.Operation{ClientId: o.client, Input: regInput{write: o.write, value: o.value},
			Call: o.call, Output: output, Return: ret, Metadata: o.detail})
		kept = append(kept, o)
	}
	return out, kept
}

// checkLinearizable checks ops and, if they are not linearizable, writes a
// visualization to the run directory and returns the evidence.
func (rn *run) checkLinearizable(ops []queueOp, name string, timeout time.Duration) (porcupine.CheckResult, string) {
	pops, kept := toPorcupine(ops)
	res, info := porcupine.CheckOperationsVerbose(registerModel, pops, timeout)
	if res == porcupine.Ok {
		return res, ""
	}
	path := filepath.Join(rn.dir, name+".html")
	if err := porcupine.VisualizePath(registerModel, info, path); err != nil {
		path = "(visualization failed: " + err.Error() + ")"
	}
	if res == porcupine.Unknown {
		return res, fmt.Sprintf("porcupine gave up after %s on %d ops; visualization: %s", timeout, len(pops), path)
	}
	return res, fmt.Sprintf("%s; longest partial linearization: %s; visualization: %s", explain(kept), partial(info), path)
}

// partial describes the longest partial linearization porcupine found.
func partial(info porcupine.LinearizationInfo) string {
	var best []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, lin := range part {
			if len(lin) > len(best) {
				best = lin
			}
		}
	}
	if len(best) == 0 {
		return "(none)"
	}
	last := best
	if len(last) > 4 {
		last = last[len(last)-4:]
	}
	var s []string
	for _, o := range last {
		s = append(s, registerModel.DescribeOperation(o.Input, o.Output))
	}
	return fmt.Sprintf("%d ops, ending … %s", len(best), strings.Join(s, ", "))
}

// explain looks for the simplest anomalies a reader can check by hand: a
// read of a value nobody wrote, a read of a value whose write began only
// after the read returned, and a stale read (a value overwritten by an
// acknowledged write that completed before the read began).
func explain(ops []queueOp) string {
	writes := map[int64]queueOp{}
	var reads, acked []queueOp
	for _, o := range ops {
		if o.write {
			writes[o.value] = o
			if o.ok {
				acked = append(acked, o)
			}
		} else {
			reads = append(reads, o)
		}
	}
	sort.Slice(reads, func(i, j int) bool { return reads[i].call < reads[j].call })
	for _, r := range reads {
		w, ok := writes[r.value]
		if !ok {
			continue // the value before the window
		}
		if w.call > r.ret {
			return fmt.Sprintf("read returned %d before its write was made: read %s; write %s", r.value, r, w)
		}
		if !w.ok {
			continue // may have taken effect any time after its call
		}
		for _, w2 := range acked {
			if w2.value != r.value && w2.call > w.ret && w2.ret < r.call {
				return fmt.Sprintf("stale read: %s returned %d, but write %s completed after write %s and before the read began",
					r, r.value, w2, w)
			}
		}
	}
	return "no single stale read explains it (a longer cycle; see the visualization)"
}
