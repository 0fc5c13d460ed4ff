package acl

import (
	"sort"
	"strings"
)

// ACL answers what one token may do. Build it with Compile; Management
// and DenyAll are the two fixed ones. An ACL is immutable and safe for
// concurrent use.
type ACL struct {
	management bool
	// queues holds one rule per pattern (policies merged), most specific
	// first: exact paths, then globs by longer prefix.
	queues   []QueueRule
	node     Level
	operator Level
	acl      Level
}

// Management may do everything.
var Management = &ACL{management: true}

// DenyAll may do nothing: the anonymous token's ACL until an operator
// writes an "anonymous" policy.
var DenyAll = &ACL{}

// Compile merges policies into one ACL. Where two policies give the same
// pattern (or both give node, operator or acl), deny wins, else the
// stronger grant.
func Compile(policies ...*Rules) *ACL {
	a := &ACL{}
	byPattern := map[string]Level{}
	for _, p := range policies {
		if p == nil {
			continue
		}
		for _, q := range p.Queues {
			byPattern[q.Pattern] = merge(byPattern[q.Pattern], q.Level)
		}
		a.node = merge(a.node, p.Node)
		a.operator = merge(a.operator, p.Operator)
		a.acl = merge(a.acl, p.ACL)
	}
	for pattern, l := range byPattern {
		a.queues = append(a.queues, QueueRule{Pattern: pattern, Level: l})
	}
	sort.Slice(a.queues, func(i, j int) bool { return moreSpecific(a.queues[i].Pattern, a.queues[j].Pattern) })
	return a
}

func merge(a, b Level) Level {
	if a == LevelDeny || b == LevelDeny {
		return LevelDeny
	}
	return max(a, b)
}

// moreSpecific orders patterns: exact paths before globs, longer globs
// before shorter ones, then by text (for a stable order).
func moreSpecific(a, b string) bool {
	ag, bg := strings.HasSuffix(a, "*"), strings.HasSuffix(b, "*")
	if ag != bg {
		return !ag
	}
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a < b
}

// IsManagement reports whether this is a management ACL.
func (a *ACL) IsManagement() bool { return a.management }

// QueueLevel is what the ACL grants on a queue: the most specific rule
// that matches it decides (a deny there means LevelDeny).
func (a *ACL) QueueLevel(path string) Level {
	if a.management {
		return LevelAdmin
	}
	for _, r := range a.queues {
		if r.Matches(path) {
			return r.Level
		}
	}
	return LevelNone
}

// AllowQueue reports whether the ACL grants at least want on the queue.
func (a *ACL) AllowQueue(path string, want Level) bool { return granted(a.QueueLevel(path), want) }

// AllowSomeQueue reports whether the ACL grants at least want on some
// queue: what a request about a queue the body names needs, at least.
func (a *ACL) AllowSomeQueue(want Level) bool {
	if a.management {
		return true
	}
	for _, r := range a.queues {
		if granted(r.Level, want) {
			return true
		}
	}
	return false
}

// AllowNode reports whether the ACL grants at least want (read or write)
// on nodes.
func (a *ACL) AllowNode(want Level) bool { return a.management || granted(a.node, want) }

// AllowOperator reports whether the ACL grants at least want (read or
// write) on cluster operations: queue configuration, Raft peers, keyrings.
func (a *ACL) AllowOperator(want Level) bool { return a.management || granted(a.operator, want) }

// AllowACL reports whether the ACL grants at least want (read or write) on
// tokens and policies.
func (a *ACL) AllowACL(want Level) bool { return a.management || granted(a.acl, want) }

func granted(have, want Level) bool { return have != LevelDeny && have != LevelNone && have >= want }
