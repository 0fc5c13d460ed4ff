package scheduler

import "fmt"

// PromotionRefusal says why a container was not promoted from
// opportunistic to guaranteed, and whether asking again later may succeed
// (the container may start running, or room may free up).
type PromotionRefusal struct {
	Reason    string `codec:"reason"`
	Retryable bool   `codec:"retryable"`
}

func (r *PromotionRefusal) Error() string { return r.Reason }

// Refusals of CheckPromotions.
var (
	PromoteUnknown    = &PromotionRefusal{"not known to the servers yet", true}
	PromoteNotRunning = &PromotionRefusal{"not running", true}
	PromoteNoRoom     = &PromotionRefusal{"its node has no free guaranteed capacity for it", true}
	PromoteNotYours   = &PromotionRefusal{"not a live container of this app's current attempt", false}
	PromoteGuaranteed = &PromotionRefusal{"already guaranteed", false}
	PromoteNodeDown   = &PromotionRefusal{"its node is not ready", false}
)

// CheckPromotions decides which of the given containers of app may become
// guaranteed (SPEC §10): each must be a running opportunistic container of
// the app's current, running attempt, on a READY node whose free
// guaranteed capacity holds it, and the app's queue and every queue above
// it must stay within max_resources. Containers are decided in order, each
// counting the grants before it. A container promoted already is granted
// again (promotion is idempotent). A nil container stands for an ID the
// state does not hold (yet). The result holds, per container, nil for a
// grant or the refusal.
func CheckPromotions(st State, app *App, cs []*Container) []*PromotionRefusal {
	out := make([]*PromotionRefusal, len(cs))
	nodes := map[string]*Node{}
	for _, n := range st.Nodes() {
		nodes[n.ID] = n
	}
	t := buildTree(st, ClusterCapacity(st)) // a capacity queue's max_capacity is a share of it
	var chain []*qnode                      // the app's leaf and its ancestors
	for q := t.byPath[app.Queue]; q != nil; q = q.parent {
		chain = append(chain, q)
	}
	granted := map[string]Resources{} // per node, by earlier grants
	var grantedApp Resources
	for i, c := range cs {
		switch {
		case c == nil:
			out[i] = PromoteUnknown
		case c.Promoted && c.State.Live() && c.AppID == app.ID && c.Attempt == app.CurrentAttempt():
			continue // granted before
		case c.AppID != app.ID || c.Attempt != app.CurrentAttempt() || app.State != AppRunning || !c.State.Live():
			out[i] = PromoteNotYours
		case c.ExecutionType == Guaranteed:
			out[i] = PromoteGuaranteed
		case c.State != ContainerRunning:
			out[i] = PromoteNotRunning
		case nodes[c.NodeID] == nil || nodes[c.NodeID].Status != NodeReady:
			out[i] = PromoteNodeDown
		case !c.Resources.Add(granted[c.NodeID]).Fits(nodes[c.NodeID].FreeGuaranteed()):
			out[i] = PromoteNoRoom
		}
		if out[i] != nil {
			continue
		}
		for _, q := range chain {
			if q.max != nil && !q.usage.Add(grantedApp).Add(c.Resources).WithinLimit(*q.max) {
				out[i] = &PromotionRefusal{Reason: fmt.Sprintf("queue %s would exceed its max_resources", q.queue.Path), Retryable: true}
				break
			}
		}
		if out[i] == nil {
			granted[c.NodeID] = granted[c.NodeID].Add(c.Resources)
			grantedApp = grantedApp.Add(c.Resources)
		}
	}
	return out
}
