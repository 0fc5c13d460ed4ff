package fedstate

import (
	"cmp"
	"slices"

	iradix "github.com/hashicorp/go-immutable-radix/v2"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/scheduler/federation"
)

// Subcluster is one sub-cluster as the routers know it.
type Subcluster struct {
	ID     string           `codec:"id"`
	State  federation.State `codec:"state"`
	Reason string           `codec:"reason,omitempty"` // why UNHEALTHY, LOST or DECOMMISSIONED
	// Servers are its servers' RPC addresses, HTTPAddr its leader's HTTP
	// address, Leader its leader's node ID, from its last heartbeat.
	Servers  []string `codec:"servers"`
	HTTPAddr string   `codec:"http_addr,omitempty"`
	Leader   string   `codec:"leader"`
	// Term and Seq order its heartbeats: its leader's Raft term, then a
	// number that grows within a term. An older heartbeat is refused.
	Term uint64 `codec:"term"`
	Seq  uint64 `codec:"seq"`
	// Capacity of its READY nodes, guaranteed resources used, and demand
	// pending (asked, not placed).
	Capacity scheduler.Resources `codec:"capacity"`
	Used     scheduler.Resources `codec:"used"`
	Pending  scheduler.Resources `codec:"pending"`
	// Routed is what the routers sent it since its last heartbeat (that
	// heartbeat's Pending cannot count it yet).
	Routed      scheduler.Resources              `codec:"routed"`
	NodesReady  int                              `codec:"nodes_ready"`
	NodesTotal  int                              `codec:"nodes_total"`
	AppsRunning int                              `codec:"apps_running"`
	Queues      map[string]*federation.QueueLoad `codec:"queues"`
	Racks       []string                         `codec:"racks"`
	// UnmanagedAMs counts the apps spanning into it from other
	// sub-clusters, as its last heartbeat said.
	UnmanagedAMs int `codec:"unmanaged_ams,omitempty"`
	// Homes is how many apps the routers made their home here (counted
	// in Apply, including ones a refusal moved on from).
	Homes int `codec:"homes"`
	// FirstSeen, LastHeartbeat and StateSince are Unix nanoseconds on the
	// router leader's clock.
	FirstSeen     int64 `codec:"first_seen"`
	LastHeartbeat int64 `codec:"last_heartbeat"`
	StateSince    int64 `codec:"state_since"`
}

// HomeState is where the submission of an app through the routers stands.
type HomeState string

// The states of an app's submission.
const (
	// HomeRouting: the mapping is recorded; the app is being submitted to
	// Home.
	HomeRouting HomeState = "ROUTING"
	// HomeSubmitted: Home accepted the app.
	HomeSubmitted HomeState = "SUBMITTED"
	// HomeInDoubt: the submission to Home may or may not have happened
	// (no answer); it is settled by fencing the ID there.
	HomeInDoubt HomeState = "IN_DOUBT"
	// HomeFailed: every ranked sub-cluster refused it.
	HomeFailed HomeState = "FAILED"
)

// settled reports whether a mapping in state s may be dropped to make room.
func (s HomeState) settled() bool { return s == HomeSubmitted || s == HomeFailed }

// Try is one sub-cluster a submission tried and what came of it.
type Try struct {
	Subcluster string `codec:"subcluster"`
	Outcome    string `codec:"outcome"`
	Message    string `codec:"message,omitempty"`
	At         int64  `codec:"at"`
}

// AppHome is an app submitted through the routers and its home.
type AppHome struct {
	AppID     string              `codec:"app_id"`
	RequestID string              `codec:"request_id"`
	Queue     string              `codec:"queue"`
	User      string              `codec:"user"`
	Demand    scheduler.Resources `codec:"demand"`
	// Ranking is the policy's order of the candidates when the app was
	// recorded; a refused submission goes on to the next RUNNING one.
	Ranking []string  `codec:"ranking"`
	Home    string    `codec:"home"`
	State   HomeState `codec:"state"`
	// LocalID is the app's ID in its home sub-cluster, once SUBMITTED.
	LocalID string `codec:"local_id,omitempty"`
	// Spans are the other sub-clusters the app's AMRMProxy registered an
	// unmanaged AM in (federation part 2), in the order it did.
	Spans     []string `codec:"spans,omitempty"`
	Tries     []Try    `codec:"tries,omitempty"`
	CreatedAt int64    `codec:"created_at"`
	UpdatedAt int64    `codec:"updated_at"`
}

// State is the routers' replicated state at one index: immutable, shared
// by every reader; Apply builds the next one.
type State struct {
	index       uint64
	subclusters map[string]*Subcluster
	homes       *iradix.Tree[*AppHome] // by app ID
	byRequest   *iradix.Tree[string]   // request ID → app ID
	byLocal     *iradix.Tree[string]   // home + "/" + local ID → app ID
	policies    map[string]federation.Policy
	weights     map[string]map[string]uint32 // queue → sub-cluster → generated weight
	weightsGen  uint64
	submits     map[string]uint64 // queue → submissions so far (Weighted's sequence)
	nextApp     uint64            // the number of the next app ID
}

func emptyState() *State {
	return &State{
		subclusters: map[string]*Subcluster{},
		homes:       iradix.New[*AppHome](),
		byRequest:   iradix.New[string](),
		byLocal:     iradix.New[string](),
		policies:    map[string]federation.Policy{},
		weights:     map[string]map[string]uint32{},
		submits:     map[string]uint64{},
	}
}

// Index is the Raft index of the last entry applied to this state.
func (s *State) Index() uint64 { return s.index }

// Subclusters returns the sub-clusters in ID order. The values are shared:
// do not modify them.
func (s *State) Subclusters() []*Subcluster {
	out := make([]*Subcluster, 0, len(s.subclusters))
	for _, sc := range s.subclusters {
		out = append(out, sc)
	}
	slices.SortFunc(out, func(a, b *Subcluster) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Subcluster returns one sub-cluster, or nil.
func (s *State) Subcluster(id string) *Subcluster { return s.subclusters[id] }

// AppHome returns the mapping of an app, or nil.
func (s *State) AppHome(appID string) *AppHome {
	h, _ := s.homes.Get([]byte(appID))
	return h
}

// AppHomeByRequest returns the mapping a submission's request ID made, or nil.
func (s *State) AppHomeByRequest(requestID string) *AppHome {
	id, ok := s.byRequest.Get([]byte(requestID))
	if !ok {
		return nil
	}
	return s.AppHome(id)
}

// AppHomeByLocal returns the mapping of the app that sub-cluster home
// holds as localID, or nil.
func (s *State) AppHomeByLocal(home, localID string) *AppHome {
	id, ok := s.byLocal.Get([]byte(home + "/" + localID))
	if !ok {
		return nil
	}
	return s.AppHome(id)
}

// AppHomes returns every mapping in app ID order.
func (s *State) AppHomes() []*AppHome {
	out := make([]*AppHome, 0, s.homes.Len())
	it := s.homes.Root().Iterator()
	for _, h, ok := it.Next(); ok; _, h, ok = it.Next() {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b *AppHome) int { return scheduler.CompareIDs(a.AppID, b.AppID) })
	return out
}

// Policies returns the queues' policies in queue order ("" is the default).
func (s *State) Policies() []federation.Policy {
	out := make([]federation.Policy, 0, len(s.policies))
	for _, p := range s.policies {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b federation.Policy) int { return cmp.Compare(a.Queue, b.Queue) })
	return out
}

// Policy returns the policy that governs queue (federation.PolicyFor).
func (s *State) Policy(queue string) federation.Policy {
	return federation.PolicyFor(s.policies, queue)
}

// Weights returns the generated weights of queue (nil: none yet) and the
// generation of the last write.
func (s *State) Weights(queue string) (map[string]uint32, uint64) {
	return s.weights[queue], s.weightsGen
}

// WeightedQueues returns the queues that have generated weights, sorted.
func (s *State) WeightedQueues() []string {
	out := make([]string, 0, len(s.weights))
	for q := range s.weights {
		out = append(out, q)
	}
	slices.Sort(out)
	return out
}

// Candidates returns every sub-cluster as a ranking for queue sees it, in
// ID order, with the queue's effective weights (its policy's own, else the
// generator's for it, else the generator's for every queue).
func (s *State) Candidates(queue string) []federation.Candidate {
	subs := s.Subclusters()
	ids := make([]string, len(subs))
	for i, sc := range subs {
		ids[i] = sc.ID
	}
	gen := s.weights[queue]
	if gen == nil {
		gen = s.weights[""] // the generator's weights for every queue
	}
	w := federation.EffectiveWeights(s.Policy(queue), gen, ids)
	out := make([]federation.Candidate, len(subs))
	for i, sc := range subs {
		racks := make(map[string]bool, len(sc.Racks))
		for _, r := range sc.Racks {
			racks[r] = true
		}
		out[i] = federation.Candidate{ID: sc.ID, State: sc.State, Capacity: sc.Capacity, Used: sc.Used,
			Pending: sc.Pending, Routed: sc.Routed, Weight: w[sc.ID], Racks: racks}
	}
	return out
}

// Loads returns every sub-cluster as the policy generator reads it.
func (s *State) Loads() []federation.SubclusterLoad {
	subs := s.Subclusters()
	out := make([]federation.SubclusterLoad, len(subs))
	for i, sc := range subs {
		out[i] = federation.SubclusterLoad{ID: sc.ID, State: sc.State, Capacity: sc.Capacity, Used: sc.Used,
			Pending: sc.Pending, Queues: sc.Queues}
	}
	return out
}
