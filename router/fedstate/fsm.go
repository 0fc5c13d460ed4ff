package fedstate

import (
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	iradix "github.com/hashicorp/go-immutable-radix/v2"
	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/scheduler/federation"
)

// FSM is the routers' raft.BatchingFSM. Raft calls Apply, ApplyBatch,
// Snapshot and Restore from one goroutine; State is read from anywhere.
type FSM struct {
	state atomic.Pointer[State]
	halt  atomic.Pointer[HaltError]

	mu      sync.Mutex    // guards changed
	changed chan struct{} // closed and replaced when a new state is published
}

var _ raft.BatchingFSM = (*FSM)(nil)

// New returns an FSM holding an empty federation.
func New() *FSM {
	f := &FSM{changed: make(chan struct{})}
	f.state.Store(emptyState())
	return f
}

// State returns the latest published state.
func (f *FSM) State() *State { return f.state.Load() }

// Changed returns a channel closed when a state newer than the current one
// is published (blocking queries wait on it).
func (f *FSM) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// Halted returns why the FSM stopped applying entries, or nil.
func (f *FSM) Halted() *HaltError { return f.halt.Load() }

func (f *FSM) publish(s *State) {
	f.state.Store(s)
	f.mu.Lock()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// Apply applies one committed entry: the result is nil, a *Rejection, a
// command's value, or a *HaltError.
func (f *FSM) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch applies committed entries in order and publishes one state
// for them all. An entry that cannot be decoded halts the FSM before it
// changes anything (package fsm does the same).
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	if h := f.halt.Load(); h != nil {
		for i := range out {
			out[i] = h
		}
		return out
	}
	t := newTxn(f.state.Load())
	for i, l := range logs {
		res, h := t.applyEntry(l)
		if h != nil {
			f.halt.Store(h)
			for j := i; j < len(logs); j++ {
				out[j] = h
			}
			break
		}
		out[i] = res
	}
	if t.dirty {
		f.publish(t.commit())
	}
	return out
}

// txn builds the next state from the current one: small maps are copied
// on their first write, the radix trees written through transactions.
type txn struct {
	s                       State
	homes                   *iradix.Txn[*AppHome]
	byRequest               *iradix.Txn[string]
	byLocal                 *iradix.Txn[string]
	ownSubs, ownPol, ownWts bool
	ownSubmits              bool
	dirty                   bool
	nHomes                  int // mappings in homes
}

func newTxn(cur *State) *txn {
	return &txn{s: *cur, homes: cur.homes.Txn(), byRequest: cur.byRequest.Txn(), byLocal: cur.byLocal.Txn(), nHomes: cur.homes.Len()}
}

func (t *txn) commit() *State {
	s := t.s
	s.homes, s.byRequest, s.byLocal = t.homes.Commit(), t.byRequest.Commit(), t.byLocal.Commit()
	return &s
}

func (t *txn) subs() map[string]*Subcluster {
	if !t.ownSubs {
		t.s.subclusters, t.ownSubs = maps.Clone(t.s.subclusters), true
	}
	return t.s.subclusters
}

func (t *txn) applyEntry(l *raft.Log) (any, *HaltError) {
	if l.Type != raft.LogCommand {
		return nil, nil
	}
	if len(l.Data) == 0 {
		return nil, &HaltError{Index: l.Index, Reason: "empty command"}
	}
	typ, body := MessageType(l.Data[0]), l.Data[1:]
	run, err := decodeCommand(typ&typeMask, body)
	if err != nil {
		if typ&ignoreUnknownFlag != 0 && typ&typeMask > maxKnownType {
			t.s.index, t.dirty = l.Index, true
			return nil, nil
		}
		return nil, &HaltError{Index: l.Index, Type: typ, Reason: err.Error()}
	}
	t.s.index, t.dirty = l.Index, true
	return run(t), nil
}

// decodeCommand decodes a command into the function that applies it;
// nothing changes until that runs.
func decodeCommand(typ MessageType, body []byte) (func(*txn) any, error) {
	switch typ {
	case HeartbeatType:
		return decodeAs(body, (*txn).heartbeat)
	case MarkLostType:
		return decodeAs(body, (*txn).markLost)
	case AdminType:
		return decodeAs(body, (*txn).admin)
	case HomePutType:
		return decodeAs(body, (*txn).homePut)
	case HomeAdvanceType:
		return decodeAs(body, (*txn).homeAdvance)
	case HomeSettleType:
		return decodeAs(body, (*txn).homeSettle)
	case HomeGCType:
		return decodeAs(body, (*txn).homeGC)
	case PolicyApplyType:
		return decodeAs(body, (*txn).policyApply)
	case WeightsWriteType:
		return decodeAs(body, (*txn).weightsWrite)
	case SpanAddType:
		return decodeAs(body, (*txn).spanAdd)
	}
	return nil, fmt.Errorf("unknown command type %d", typ)
}

func decodeAs[R any](body []byte, apply func(*txn, *R) any) (func(*txn) any, error) {
	req := new(R)
	if err := decode(body, req); err != nil {
		return nil, err
	}
	return func(t *txn) any { return apply(t, req) }, nil
}

func (t *txn) heartbeat(r *HeartbeatRequest) any {
	if err := federation.ValidateID(r.ID); err != nil {
		return reject(ErrInvalid, "id: %v", err)
	}
	switch {
	case len(r.Servers) == 0 || len(r.Servers) > MaxServers:
		return reject(ErrInvalid, "servers: %d addresses; a heartbeat names 1 to %d", len(r.Servers), MaxServers)
	case len(r.Queues) > MaxQueueLoads:
		return reject(ErrInvalid, "queues: %d; at most %d", len(r.Queues), MaxQueueLoads)
	case len(r.Racks) > MaxRacks:
		return reject(ErrInvalid, "racks: %d; at most %d", len(r.Racks), MaxRacks)
	case tooLong(r.Reason, r.HTTPAddr, r.Leader) || tooLong(r.Servers...) || tooLong(r.Racks...):
		return reject(ErrInvalid, "a string longer than %d bytes", MaxStringLen)
	}
	for q, load := range r.Queues {
		if tooLong(q) {
			return reject(ErrInvalid, "queues: a queue path longer than %d bytes", MaxStringLen)
		}
		if load == nil {
			return reject(ErrInvalid, "queues: %s has no load", q)
		}
	}
	old := t.s.subclusters[r.ID]
	if old == nil && len(t.s.subclusters) >= MaxSubclusters {
		return reject(ErrFull, "id: %s would be sub-cluster %d; a federation holds at most %d", r.ID, MaxSubclusters+1, MaxSubclusters)
	}
	sc := &Subcluster{ID: r.ID, State: federation.StateNew, FirstSeen: r.Now, StateSince: r.Now}
	if old != nil {
		if r.Term < old.Term || r.Term == old.Term && r.Seq <= old.Seq {
			return reject(ErrConflict, "sub-cluster %s: heartbeat (term %d, seq %d) is not newer than (term %d, seq %d)", r.ID, r.Term, r.Seq, old.Term, old.Seq)
		}
		c := *old
		sc = &c
	}
	ev := federation.EventHealthy
	if !r.Healthy {
		ev = federation.EventUnhealthy
	}
	if next := federation.Transition(sc.State, ev); next != sc.State {
		sc.State, sc.StateSince = next, r.Now
	}
	if sc.State != federation.StateDecommissioned {
		sc.Reason = ""
		if !r.Healthy {
			sc.Reason = r.Reason
		}
	}
	sc.Servers, sc.HTTPAddr, sc.Leader = slices.Clone(r.Servers), r.HTTPAddr, r.Leader
	sc.Term, sc.Seq = r.Term, r.Seq
	sc.Capacity, sc.Used, sc.Pending, sc.Routed = r.Capacity, r.Used, r.Pending, scheduler.Resources{}
	sc.NodesReady, sc.NodesTotal, sc.AppsRunning, sc.UnmanagedAMs = r.NodesReady, r.NodesTotal, r.AppsRunning, r.UnmanagedAMs
	sc.Queues = maps.Clone(r.Queues)
	sc.Racks = slices.Sorted(slices.Values(r.Racks))
	sc.LastHeartbeat = r.Now
	t.subs()[r.ID] = sc
	return sc
}

func tooLong(ss ...string) bool {
	for _, s := range ss {
		if len(s) > MaxStringLen {
			return true
		}
	}
	return false
}

func (t *txn) markLost(r *MarkLostRequest) any {
	old := t.s.subclusters[r.ID]
	switch {
	case old == nil:
		return reject(ErrNotFound, "no sub-cluster %s", r.ID)
	case old.LastHeartbeat != r.LastHeartbeat:
		return reject(ErrConflict, "sub-cluster %s heartbeated since", r.ID)
	}
	next := federation.Transition(old.State, federation.EventTimeout)
	if next == old.State {
		return old
	}
	sc := *old
	sc.State, sc.StateSince, sc.Reason = next, r.Now, "no heartbeat for "+time.Duration(r.Now-old.LastHeartbeat).Round(time.Second).String()
	t.subs()[r.ID] = &sc
	return &sc
}

func (t *txn) admin(r *AdminRequest) any {
	old := t.s.subclusters[r.ID]
	if old == nil {
		return reject(ErrNotFound, "no sub-cluster %s", r.ID)
	}
	var ev federation.Event
	switch r.Action {
	case Decommission:
		ev = federation.EventDecommission
	case Recommission:
		ev = federation.EventRecommission
	case Forget:
		if old.State != federation.StateDecommissioned {
			return reject(ErrConflict, "sub-cluster %s is %s: decommission it before forgetting it", r.ID, old.State)
		}
		delete(t.subs(), r.ID)
		return nil
	default:
		return reject(ErrInvalid, "action: %q is not decommission, recommission or forget", r.Action)
	}
	sc := *old
	if next := federation.Transition(sc.State, ev); next != sc.State {
		sc.State, sc.StateSince = next, r.Now
		sc.Reason = ""
		if next == federation.StateDecommissioned {
			sc.Reason = "decommissioned by an operator"
		}
	}
	t.subs()[r.ID] = &sc
	return &sc
}

// AppIDPrefix starts every app ID the routers mint; a sub-cluster's own
// IDs (app-N) never do, so the two cannot collide.
const AppIDPrefix = "app-f"

func (t *txn) homePut(r *HomePutRequest) any {
	switch {
	case r.RequestID == "" || tooLong(r.RequestID):
		return reject(ErrInvalid, "request_id: must be 1 to %d bytes", MaxStringLen)
	case r.Queue == "" || tooLong(r.Queue, r.User):
		return reject(ErrInvalid, "queue: must be 1 to %d bytes", MaxStringLen)
	case len(r.Preferred.Nodes)+len(r.Preferred.Racks) > MaxRacks:
		return reject(ErrInvalid, "preferred: %d nodes and racks; at most %d", len(r.Preferred.Nodes)+len(r.Preferred.Racks), MaxRacks)
	}
	if id, ok := t.byRequest.Get([]byte(r.RequestID)); ok {
		if h, ok := t.homes.Get([]byte(id)); ok {
			return h
		}
	}
	if t.nHomes >= MaxAppHomes && !t.dropOldestSettled() {
		return reject(ErrFull, "the routers hold %d submissions not yet settled; try again", MaxAppHomes)
	}
	seq := t.s.submits[r.Queue]
	ranking, err := federation.Rank(t.policy(r.Queue).Router, federation.Request{Queue: r.Queue, Preferred: r.Preferred, Seed: r.Seed, Seq: seq},
		t.candidates(r.Queue))
	if err != nil {
		var nr *federation.NoRouteError
		if errors.As(err, &nr) && nr.Transient {
			return reject(ErrNoRoute, "queue %s: %v", r.Queue, err)
		}
		return reject(ErrInvalid, "queue %s: %v", r.Queue, err)
	}
	if !t.ownSubmits {
		t.s.submits, t.ownSubmits = maps.Clone(t.s.submits), true
	}
	t.s.submits[r.Queue] = seq + 1
	t.s.nextApp++
	h := &AppHome{AppID: fmt.Sprintf("%s%d", AppIDPrefix, t.s.nextApp), RequestID: r.RequestID, Queue: r.Queue, User: r.User,
		Demand: r.Demand, Ranking: ranking, Home: ranking[0], State: HomeRouting, CreatedAt: r.Now, UpdatedAt: r.Now}
	t.homes.Insert([]byte(h.AppID), h)
	t.byRequest.Insert([]byte(h.RequestID), h.AppID)
	t.nHomes++
	t.routed(h.Home, h.Demand)
	return h
}

func (t *txn) policy(queue string) federation.Policy {
	return federation.PolicyFor(t.s.policies, queue)
}

func (t *txn) candidates(queue string) []federation.Candidate {
	return (&State{subclusters: t.s.subclusters, policies: t.s.policies, weights: t.s.weights}).Candidates(queue)
}

// routed counts demand sent to a sub-cluster until its next heartbeat, and
// the app among its homes.
func (t *txn) routed(id string, demand scheduler.Resources) {
	old := t.s.subclusters[id]
	if old == nil {
		return
	}
	sc := *old
	sc.Routed = sc.Routed.Add(demand)
	sc.Homes++
	t.subs()[id] = &sc
}

// dropOldestSettled removes the oldest settled mapping to make room.
func (t *txn) dropOldestSettled() bool {
	var oldest *AppHome
	it := t.homes.Root().Iterator()
	for _, h, ok := it.Next(); ok; _, h, ok = it.Next() {
		if h.State.settled() && (oldest == nil || h.CreatedAt < oldest.CreatedAt) {
			oldest = h
		}
	}
	if oldest == nil {
		return false
	}
	t.deleteHome(oldest)
	return true
}

func (t *txn) deleteHome(h *AppHome) {
	if _, ok := t.homes.Delete([]byte(h.AppID)); ok {
		t.nHomes--
	}
	t.byRequest.Delete([]byte(h.RequestID))
	if h.LocalID != "" {
		t.byLocal.Delete([]byte(h.Home + "/" + h.LocalID))
	}
}

func (t *txn) homeAdvance(r *HomeAdvanceRequest) any {
	old, ok := t.homes.Get([]byte(r.AppID))
	switch {
	case !ok:
		return reject(ErrNotFound, "no app %s", r.AppID)
	case old.Home != r.From || old.State == HomeSubmitted || old.State == HomeFailed:
		return reject(ErrConflict, "app %s is %s at %s, not in submission to %s", r.AppID, old.State, old.Home, r.From)
	case old.State == HomeInDoubt && r.Outcome != OutcomeRefused &&
		!(r.Outcome == OutcomeFenced && t.s.subclusters[old.Home] != nil && t.s.subclusters[old.Home].State == federation.StateDecommissioned):
		// The submission may have reached the home before it stopped
		// answering: only the home's own answer to the request ID (a
		// refusal, which says it never took it) lets the app move on — or
		// the operator, by decommissioning the home (fenced).
		return reject(ErrConflict, "app %s is IN_DOUBT at %s: only a refusal from %s, or its decommissioning, moves it on", r.AppID, old.Home, old.Home)
	case len(old.Tries) >= MaxTries || tooLong(r.Outcome, r.Message):
		return reject(ErrInvalid, "app %s: too many tries or too long a message", r.AppID)
	}
	h := *old
	h.Tries = append(slices.Clip(old.Tries), Try{Subcluster: r.From, Outcome: r.Outcome, Message: r.Message, At: r.Now})
	h.UpdatedAt = r.Now
	h.State, h.Home = HomeFailed, ""
	tried := make(map[string]bool, len(h.Tries))
	for _, tr := range h.Tries {
		tried[tr.Subcluster] = true
	}
	for _, id := range h.Ranking {
		if sc := t.s.subclusters[id]; sc != nil && sc.State.Routable() && !tried[id] {
			h.State, h.Home = HomeRouting, id
			t.routed(id, h.Demand)
			break
		}
	}
	t.homes.Insert([]byte(h.AppID), &h)
	return &h
}

func (t *txn) homeSettle(r *HomeSettleRequest) any {
	old, ok := t.homes.Get([]byte(r.AppID))
	switch {
	case !ok:
		return reject(ErrNotFound, "no app %s", r.AppID)
	case r.State != HomeSubmitted && r.State != HomeInDoubt && r.State != HomeFailed:
		return reject(ErrInvalid, "state: %q is not SUBMITTED, IN_DOUBT or FAILED", r.State)
	case old.Home != r.Home || old.State == HomeSubmitted || old.State == HomeFailed:
		return reject(ErrConflict, "app %s is %s at %s, not in submission to %s", r.AppID, old.State, old.Home, r.Home)
	case (r.State == HomeSubmitted) != (r.LocalID != "") || tooLong(r.LocalID):
		return reject(ErrInvalid, "local_id: give the app's ID at its home with SUBMITTED, and only then")
	}
	h := *old
	h.State, h.UpdatedAt, h.LocalID = r.State, r.Now, r.LocalID
	t.homes.Insert([]byte(h.AppID), &h)
	if h.LocalID != "" {
		t.byLocal.Insert([]byte(h.Home+"/"+h.LocalID), h.AppID)
	}
	return &h
}

func (t *txn) spanAdd(r *SpanAddRequest) any {
	old, ok := t.homes.Get([]byte(r.AppID))
	switch {
	case !ok:
		return reject(ErrNotFound, "no app %s", r.AppID)
	case old.State != HomeSubmitted:
		return reject(ErrConflict, "app %s is %s, not SUBMITTED: it spans nowhere yet", r.AppID, old.State)
	case t.s.subclusters[r.Subcluster] == nil:
		return reject(ErrNotFound, "subcluster: no sub-cluster %.64q", r.Subcluster)
	case r.Subcluster == old.Home:
		return reject(ErrInvalid, "subcluster: %s is app %s's home, not a span", r.Subcluster, r.AppID)
	case slices.Contains(old.Spans, r.Subcluster):
		return old
	case len(old.Spans) >= MaxSubclusters:
		return reject(ErrFull, "app %s spans %d sub-clusters already", r.AppID, len(old.Spans))
	}
	h := *old
	h.Spans = append(slices.Clone(old.Spans), r.Subcluster)
	h.UpdatedAt = r.Now
	t.homes.Insert([]byte(h.AppID), &h)
	return &h
}

func (t *txn) homeGC(r *HomeGCRequest) any {
	var drop []*AppHome
	it := t.homes.Root().Iterator()
	for _, h, ok := it.Next(); ok; _, h, ok = it.Next() {
		if h.State == HomeSubmitted && h.CreatedAt < r.Before || h.State == HomeFailed && h.CreatedAt < r.FailedBefore {
			drop = append(drop, h)
		}
	}
	for _, h := range drop {
		t.deleteHome(h)
	}
	return len(drop)
}

func (t *txn) policyApply(r *PolicyApplyRequest) any {
	next := map[string]federation.Policy{}
	if !r.Replace {
		next = maps.Clone(t.s.policies)
	}
	seen := map[string]bool{}
	for _, p := range r.Policies {
		if err := p.Validate(); err != nil {
			return reject(ErrInvalid, "%v", err)
		}
		if seen[p.Queue] {
			return reject(ErrInvalid, "queue %q: two policies", p.Queue)
		}
		seen[p.Queue] = true
		next[p.Queue] = p
	}
	if len(next) > MaxPolicies {
		return reject(ErrFull, "%d policies; at most %d", len(next), MaxPolicies)
	}
	t.s.policies, t.ownPol = next, true
	return len(next)
}

func (t *txn) weightsWrite(r *WeightsWriteRequest) any {
	if r.Generation <= t.s.weightsGen {
		return reject(ErrConflict, "weights generation %d is not above %d", r.Generation, t.s.weightsGen)
	}
	if len(r.Weights) > MaxPolicies+1 {
		return reject(ErrInvalid, "weights: %d queues; at most %d", len(r.Weights), MaxPolicies+1)
	}
	next := maps.Clone(t.s.weights)
	for q, w := range r.Weights {
		if tooLong(q) || len(w) > MaxSubclusters {
			return reject(ErrInvalid, "weights: queue %.40q: too long a name or too many sub-clusters", q)
		}
		if len(w) == 0 {
			delete(next, q)
			continue
		}
		next[q] = maps.Clone(w)
	}
	t.s.weights, t.s.weightsGen, t.ownWts = next, r.Generation, true
	return nil
}

// Seed is the ranking seed of a request ID: FNV-1a of it.
func Seed(requestID string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(requestID))
	return h.Sum64()
}
