package sim

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
)

// The opportunistic matrix: scenarios named opp-PAIR.KIND-rN are run N of
// one kind of one pair (make sim-bench's OPP_PAIRS and OPP_KINDS): the
// same seed and work, guaranteed only against half opportunistic with every
// mechanism, and with each mechanism off. The report gives each pair one
// table, each kind the mean of its runs and every run's figure.

// oppName splits an opportunistic matrix scenario's name.
var oppName = regexp.MustCompile(`^opp-(.+)\.([a-z-]+)-r(\d+)$`)

// oppKindOrder is the order kinds are reported in; others follow.
var oppKindOrder = []string{"guaranteed", "opportunistic", "no-windows", "no-pause", "no-overcommit", "no-turn-away"}

// oppKindText says what each kind is.
var oppKindText = map[string]string{
	"guaranteed":    "guaranteed only",
	"opportunistic": "half opportunistic, every mechanism",
	"no-windows":    "… without windows (one shared list)",
	"no-pause":      "… without pausing (evicted work is lost)",
	"no-overcommit": "… without overcommit",
	"no-turn-away":  "… without turn-away feedback",
}

// isOpp says whether a run belongs to the opportunistic matrix.
func isOpp(r ReportRun) bool { return oppName.MatchString(r.Name) }

// oppGroup is the runs of one kind of one pair.
type oppGroup struct {
	kind string
	runs []Summary
}

func (g oppGroup) mean(f func(Summary) float64) float64 {
	s := 0.0
	for _, r := range g.runs {
		s += f(r)
	}
	return s / float64(max(1, len(g.runs)))
}

func (g oppGroup) each(f func(Summary) float64, format string) string {
	parts := make([]string, len(g.runs))
	for i, r := range g.runs {
		parts[i] = fmt.Sprintf(format, f(r))
	}
	return strings.Join(parts, ", ")
}

func (g oppGroup) max(f func(Summary) float64) float64 {
	m := math.Inf(-1)
	for _, r := range g.runs {
		m = math.Max(m, f(r))
	}
	return m
}

func tasksPerS(s Summary) float64 { return s.TasksPerS }
func inUse(s Summary) float64     { return 100 * s.InUseMean }
func turnedAwayPerTask(s Summary) float64 {
	return float64(s.RetriedBy["rejected"]) / float64(max(1, s.TasksFinished))
}
func evicted(s Summary) float64   { return float64(s.RetriedBy["evicted"]) }
func oppP99(s Summary) float64    { return s.OppProxyP99MS }
func oppP50(s Summary) float64    { return s.OppProxyP50MS }
func allocated(s Summary) float64 { return 100 * s.UtilisationMean }
func failedHBs(s Summary) float64 { return float64(s.HeartbeatFailed) }

// oppReport renders the matrix's tables.
func oppReport(runs []ReportRun, p func(string, ...any)) {
	pairs := map[string]map[string]*oppGroup{}
	var pairOrder []string
	for _, r := range runs {
		m := oppName.FindStringSubmatch(r.Name)
		if m == nil || r.Failed != "" {
			continue
		}
		pair, kind := m[1], m[2]
		if pairs[pair] == nil {
			pairs[pair] = map[string]*oppGroup{}
			pairOrder = append(pairOrder, pair)
		}
		if pairs[pair][kind] == nil {
			pairs[pair][kind] = &oppGroup{kind: kind}
		}
		pairs[pair][kind].runs = append(pairs[pair][kind].runs, r.Summary)
	}
	for _, pair := range pairOrder {
		groups := pairs[pair]
		kinds := make([]string, 0, len(groups))
		for k := range groups {
			kinds = append(kinds, k)
		}
		rank := func(k string) int {
			if i := slices.Index(oppKindOrder, k); i >= 0 {
				return i
			}
			return len(oppKindOrder)
		}
		slices.SortFunc(kinds, func(a, b string) int {
			if d := rank(a) - rank(b); d != 0 {
				return d
			}
			return strings.Compare(a, b)
		})
		p("**Opportunistic against guaranteed only: `%s`** (mean of the runs; each run in brackets):", pair)
		p("")
		p("| run | tasks finished/s | against guaranteed only | vcores allocated / in use | turned away per task | evicted | opportunistic ask → allocation p50 / p99 | heartbeats failed |")
		p("|---|---|---|---|---|---|---|---|")
		g0 := groups["guaranteed"]
		for _, k := range kinds {
			g := groups[k]
			gain := "—"
			if g0 != nil && k != "guaranteed" {
				gain = fmt.Sprintf("%+.1f%%", 100*(g.mean(tasksPerS)/g0.mean(tasksPerS)-1))
			}
			text := oppKindText[k]
			if text == "" {
				text = k
			}
			p("| %s | **%.1f** (%s) | %s | %.1f%% / %.1f%% | %.3f | %.0f | %.0f / %.0f ms | %.0f |", text, g.mean(tasksPerS), g.each(tasksPerS, "%.1f"), gain,
				g.mean(allocated), g.mean(inUse), g.max(turnedAwayPerTask), g.mean(evicted), g.max(oppP50), g.max(oppP99), g.max(failedHBs))
		}
		if g0 != nil {
			alloc := g0.mean(func(s Summary) float64 { return s.UtilisationMean })
			busy := g0.mean(func(s Summary) float64 { return s.InUseMean })
			if alloc > 0 && busy > 0 {
				p("")
				p("Guaranteed only keeps %.1f%% of the vcores allocated and %.1f%% in use (a simulated AM holds a vcore and uses none). "+
					"Queueing can add at most 1/U − 1 = **%+.0f%%** to it by allocation (80%% of that: %+.0f%%), and with overcommit at most %+.0f%% by use.",
					100*alloc, 100*busy, 100*(1/alloc-1), 80*(1/alloc-1), 100*(1/busy-1))
			}
		}
		p("")
	}
}
