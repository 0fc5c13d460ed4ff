package federation

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/weft-sched/weft/scheduler"
)

// PolicyType names a router policy: how a queue's new apps choose their
// home sub-cluster (SPEC §18).
type PolicyType string

// The router policies.
const (
	// Uniform ranks the sub-clusters in a random order of the request's seed.
	Uniform PolicyType = "uniform"
	// Hash sends every app of a queue to one sub-cluster, chosen by a hash
	// of the queue's name (the next ones in ID order after it).
	Hash PolicyType = "hash"
	// Priority sends every app to the sub-cluster of highest weight; a
	// weight of 0 excludes one.
	Priority PolicyType = "priority"
	// Weighted spreads a queue's apps in proportion to the weights; a
	// weight of 0 excludes one.
	Weighted PolicyType = "weighted"
	// Load sends each app to the sub-cluster with the most headroom.
	Load PolicyType = "load"
	// Locality sends each app to the sub-cluster holding most of the nodes
	// and racks it prefers (by headroom when it prefers none, or ties).
	Locality PolicyType = "locality"
	// Reject refuses the queue's apps.
	Reject PolicyType = "reject"
)

// DefaultPolicy is the router policy of a queue with none of its own and
// no default set: the most headroom.
const DefaultPolicy = Load

// PolicyTypes lists the router policies, for messages and documentation.
var PolicyTypes = []PolicyType{Uniform, Hash, Priority, Weighted, Load, Locality, Reject}

// AMRMPolicyType names how an AMRMProxy splits a spanning app's asks
// between sub-clusters (SPEC §18; federation part 2).
type AMRMPolicyType string

// The AMRMProxy policies.
const (
	AMRMHome      AMRMPolicyType = "home"
	AMRMBroadcast AMRMPolicyType = "broadcast"
	AMRMLocality  AMRMPolicyType = "locality"
)

// MaxWeight bounds one weight: weights are relative, and a bound keeps
// their sums far from overflow.
const MaxWeight = 1_000_000

// Policy is a queue's federation policy. Weights, when given, are the
// operator's and the global policy generator leaves them alone; without
// them the queue's weights are the generator's (equal until it has run).
type Policy struct {
	// Queue is the queue's path, or "" for the default of every queue.
	Queue     string            `codec:"queue" json:"queue"`
	Router    PolicyType        `codec:"router" json:"router"`
	AMRMProxy AMRMPolicyType    `codec:"amrmproxy,omitempty" json:"amrmproxy,omitempty"`
	Weights   map[string]uint32 `codec:"weights,omitempty" json:"weights,omitempty"`
}

// Validate checks a policy as `weft federation policy apply` and the
// routers' state machine take it: one line naming the field at fault.
func (p Policy) Validate() error {
	where := "default"
	if p.Queue != "" {
		where = fmt.Sprintf("queue %q", p.Queue)
		if !strings.HasPrefix(p.Queue, "root") || strings.Contains(p.Queue, "..") || strings.HasSuffix(p.Queue, ".") {
			return fmt.Errorf("%s: queue: must be a queue path such as root.prod", where)
		}
	}
	if !slices.Contains(PolicyTypes, p.Router) {
		return fmt.Errorf("%s: router: %q is not a router policy (%s)", where, p.Router, joinTypes())
	}
	switch p.AMRMProxy {
	case "", AMRMHome, AMRMBroadcast, AMRMLocality:
	default:
		return fmt.Errorf("%s: amrmproxy: %q is not an AMRMProxy policy (home, broadcast or locality)", where, p.AMRMProxy)
	}
	for _, id := range sortedKeys(p.Weights) {
		if err := ValidateID(id); err != nil {
			return fmt.Errorf("%s: weights: %v", where, err)
		}
		if p.Weights[id] > MaxWeight {
			return fmt.Errorf("%s: weights: %s: %d is more than %d", where, id, p.Weights[id], MaxWeight)
		}
	}
	return nil
}

func joinTypes() string {
	names := make([]string, len(PolicyTypes))
	for i, t := range PolicyTypes {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}

// ValidateID checks a sub-cluster ID: a lower-case letter, then up to 31
// lower-case letters, digits or dashes. No dot: routers qualify the IDs of
// a sub-cluster's containers as ID.container.
func ValidateID(id string) error {
	if id == "" || len(id) > 32 {
		return fmt.Errorf("sub-cluster ID %q: must be 1 to 32 characters", id)
	}
	for i, c := range id {
		ok := c >= 'a' && c <= 'z' || i > 0 && (c >= '0' && c <= '9' || c == '-')
		if !ok {
			return fmt.Errorf("sub-cluster ID %q: must start with a lower-case letter and hold only lower-case letters, digits and dashes", id)
		}
	}
	return nil
}

// PolicyFor returns the policy that governs queue: its own, else its
// nearest ancestor's, else the default (policies[""]), else DefaultPolicy.
func PolicyFor(policies map[string]Policy, queue string) Policy {
	for q := queue; q != ""; {
		if p, ok := policies[q]; ok {
			return p
		}
		i := strings.LastIndexByte(q, '.')
		if i < 0 {
			break
		}
		q = q[:i]
	}
	if p, ok := policies[""]; ok {
		return p
	}
	return Policy{Router: DefaultPolicy}
}

// EffectiveWeights returns the weight of each sub-cluster in ids for a
// queue under policy p: the policy's own weights when it has any (a
// sub-cluster they leave out weighs 0), else the generator's (generated,
// which may be nil), else 1,000 each.
func EffectiveWeights(p Policy, generated map[string]uint32, ids []string) map[string]uint32 {
	out := make(map[string]uint32, len(ids))
	for _, id := range ids {
		switch {
		case len(p.Weights) > 0:
			out[id] = p.Weights[id]
		case len(generated) > 0:
			out[id] = generated[id]
		default:
			out[id] = 1000
		}
	}
	return out
}

// Candidate is one sub-cluster as a ranking sees it.
type Candidate struct {
	ID    string
	State State
	// Capacity, Used and Pending are from the sub-cluster's last heartbeat;
	// Routed is what the routers sent it since, which that heartbeat could
	// not count yet (so a burst of submissions does not all go to one).
	Capacity, Used, Pending, Routed scheduler.Resources
	// Weight is the queue's effective weight for it (EffectiveWeights).
	Weight uint32
	// Nodes and Racks are the sub-cluster's nodes and racks, for Locality.
	Nodes, Racks map[string]bool
}

// Request is what a ranking knows of the app to place.
type Request struct {
	Queue     string
	Preferred scheduler.Locality
	// Seed is random per request (a hash of its request ID): a retry of
	// the same request ranks the same way.
	Seed uint64
	// Seq counts the queue's earlier submissions: Weighted spreads
	// consecutive ones along a low-discrepancy sequence.
	Seq uint64
}

// ErrRejected is the Reject policy's answer.
var ErrRejected = errors.New("the queue's router policy is reject")

// NoRouteError says no sub-cluster may take the app. Transient is set
// when that may change by itself (none is RUNNING now), not when the
// queue's policy excludes every sub-cluster.
type NoRouteError struct {
	Reason    string
	Transient bool
}

func (e *NoRouteError) Error() string { return "no sub-cluster can take the app: " + e.Reason }

// Rank orders the RUNNING candidates for a new app of req under policy
// typ, best first: the app goes to the first, and to the next when one
// refuses it or cannot be reached. It is deterministic in its arguments and
// uses integer arithmetic only (it runs in the routers' Raft Apply).
func Rank(typ PolicyType, req Request, cands []Candidate) ([]string, error) {
	if typ == Reject {
		return nil, ErrRejected
	}
	live := make([]*Candidate, 0, len(cands))
	for i := range cands {
		if cands[i].State.Routable() {
			live = append(live, &cands[i])
		}
	}
	if len(live) == 0 {
		return nil, &NoRouteError{Reason: "none is RUNNING", Transient: true}
	}
	slices.SortFunc(live, func(a, b *Candidate) int { return cmp.Compare(a.ID, b.ID) })
	switch typ {
	case Uniform:
		r := rand.New(rand.NewPCG(req.Seed, req.Seq))
		r.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
	case Hash:
		h := fnv.New64a()
		h.Write([]byte(req.Queue))
		start := int(h.Sum64() % uint64(len(live)))
		live = append(live[start:], live[:start]...)
	case Priority, Weighted:
		live = slices.DeleteFunc(live, func(c *Candidate) bool { return c.Weight == 0 })
		if len(live) == 0 {
			return nil, &NoRouteError{Reason: "every RUNNING sub-cluster weighs 0 for queue " + req.Queue}
		}
		slices.SortStableFunc(live, func(a, b *Candidate) int { return cmp.Compare(b.Weight, a.Weight) })
		first := 0
		if typ == Weighted {
			first = weightedPick(live, req.Seq)
		}
		chosen := live[first]
		live = append([]*Candidate{chosen}, slices.Delete(slices.Clone(live), first, first+1)...)
	case Load, "":
		byHeadroom(live)
	case Locality:
		if len(req.Preferred.Nodes) == 0 && len(req.Preferred.Racks) == 0 {
			byHeadroom(live)
			break
		}
		score := make(map[string]int, len(live))
		for _, c := range live {
			for _, n := range req.Preferred.Nodes {
				if c.Nodes[n] {
					score[c.ID] += 2
				}
			}
			for _, r := range req.Preferred.Racks {
				if c.Racks[r] {
					score[c.ID]++
				}
			}
		}
		byHeadroom(live)
		slices.SortStableFunc(live, func(a, b *Candidate) int { return cmp.Compare(score[b.ID], score[a.ID]) })
	default:
		return nil, fmt.Errorf("unknown router policy %q", typ)
	}
	out := make([]string, len(live))
	for i, c := range live {
		out[i] = c.ID
	}
	return out, nil
}

// weightedPick chooses the first sub-cluster of the seq-th submission: the
// point seq·φ (mod 1), the golden-ratio Weyl sequence, falls in one
// sub-cluster's interval of the cumulative weights. Consecutive points
// spread evenly over [0,1), so after n submissions each sub-cluster has
// had its share of n within O(log n) — where independent random draws
// would stray by √n.
func weightedPick(live []*Candidate, seq uint64) int {
	var total uint64
	for _, c := range live {
		total += uint64(c.Weight)
	}
	u := seq * 0x9E3779B97F4A7C15
	point, _ := bits.Mul64(u, total) // ⌊u·total / 2^64⌋ in [0, total)
	for i, c := range live {
		if point < uint64(c.Weight) {
			return i
		}
		point -= uint64(c.Weight)
	}
	return len(live) - 1
}

// byHeadroom orders candidates by Headroom, most first, then by ID.
func byHeadroom(live []*Candidate) {
	var total scheduler.Resources
	for _, c := range live {
		total = total.Add(c.Capacity)
	}
	h := make(map[string]int64, len(live))
	for _, c := range live {
		h[c.ID] = Headroom(*c, total)
	}
	slices.SortStableFunc(live, func(a, b *Candidate) int { return cmp.Compare(h[b.ID], h[a.ID]) })
}

// Headroom is a sub-cluster's free room after its backlog and what was
// routed to it since its last heartbeat, as its smallest share of the
// federation's total of any resource, in millionths (negative when its
// backlog exceeds its free room).
func Headroom(c Candidate, total scheduler.Resources) int64 {
	free := c.Capacity.Sub(c.Used).Sub(c.Pending).Sub(c.Routed)
	h := int64(1_000_000)
	for _, name := range total.Names() {
		t := total.Get(name)
		if t <= 0 {
			continue
		}
		h = min(h, free.Get(name)*1_000_000/t)
	}
	return h
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
