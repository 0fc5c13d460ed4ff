package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/weft-sched/weft/internal/config"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

func runQueue(args []string) error {
	return subcommand("queue", args, map[string]func([]string) error{
		"apply":  runQueueApply,
		"import": runQueueImport,
		"list":   runQueueList,
		"status": runQueueStatus,
	})
}

func runQueueApply(args []string) error {
	dryRun := false
	cf, pos, err := clientCommand("queue apply", args, 1, "weft queue apply [-address ADDR] [-dry-run] [-json] FILE (HCL or JSON; - reads stdin)", func(fs *flag.FlagSet) {
		fs.BoolVar(&dryRun, "dry-run", false, "change nothing: show each queue's fair shares now and after, and the running apps that would become preemptable")
	})
	if err != nil {
		return err
	}
	name := pos[0]
	var src []byte
	if name == "-" {
		name = "<stdin>"
		src, err = io.ReadAll(io.LimitReader(os.Stdin, rpc.MaxRequestSize+1))
	} else {
		src, err = os.ReadFile(name)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	if len(src) > rpc.MaxRequestSize {
		return fmt.Errorf("%s is larger than %d MiB", name, rpc.MaxRequestSize>>20)
	}
	cfg, err := config.ParseQueueConfig(name, src)
	if err != nil {
		return fmt.Errorf("%v; nothing was changed", err)
	}
	req := rpc.QueueApplyRequest{Config: cfg, DryRun: dryRun}
	var resp rpc.QueueApplyResponse
	if err := cf.call("Queue.Apply", &req, &resp); err != nil {
		if rpc.IsServerError(err) && !rpc.IsRetryable(err) || dryRun {
			return fmt.Errorf("%v; nothing was changed", err)
		}
		return fmt.Errorf("%v; whether the configuration was applied is unknown: see 'weft queue list'", err)
	}
	if dryRun {
		return printQueuePlan(cf, name, resp)
	}
	if cf.json {
		return printJSON(resp)
	}
	for _, w := range resp.Warnings {
		fmt.Fprintln(stderr, "Warning: "+w)
	}
	leaves := cfg.Leaves()
	if len(resp.Subclusters) > 0 { // a federation's router applied it to each
		fmt.Fprintf(stdout, "Applied %s to sub-clusters %s: %d queues, leaves: %s\n",
			name, strings.Join(resp.Subclusters, ", "), len(cfg.Resolve()), strings.Join(leaves, ", "))
		return nil
	}
	fmt.Fprintf(stdout, "Applied %s at index %d: %d queues, leaves: %s\n",
		name, resp.Index, len(cfg.Resolve()), strings.Join(leaves, ", "))
	return nil
}

func runQueueList(args []string) error {
	cf, _, err := clientCommand("queue list", args, 0, "weft queue list [-address ADDR] [-json] [-stale]", nil)
	if err != nil {
		return err
	}
	req := rpc.QueueListRequest{RequestHeader: cf.header()}
	var resp rpc.QueueListResponse
	if err := cf.call("Queue.List", &req, &resp); err != nil {
		return err
	}
	noteUnreachable(resp.Unreachable)
	if cf.json {
		return printJSON(orEmpty(resp.Queues))
	}
	s := resp.Scheduler
	pre := "off"
	if s.Preemption.Enabled {
		pre = fmt.Sprintf("on (utilization >= %g, wait_before_kill %s)", s.Preemption.ClusterUtilizationThreshold, s.Preemption.WaitBeforeKill)
	}
	fmt.Fprintf(stdout, "Placement: %s   Preemption: %s   Locality delays: node %s, rack %s\n\n",
		s.Placement, pre, s.Locality.NodeDelay, s.Locality.RackDelay)
	w := table()
	header := "QUEUE\tPOLICY\tWEIGHT\tMIN\tMAX\tSTEADY FAIR SHARE\tINSTANT FAIR SHARE\tUSED\tPENDING\tAPPS"
	if len(resp.Queues) > 0 && resp.Queues[0].Subcluster != "" { // a federation's router answered
		header += "\tSUB-CLUSTER"
	}
	fmt.Fprintln(w, header)
	for _, q := range resp.Queues {
		name := strings.Repeat("  ", q.Depth) + q.Name[strings.LastIndex(q.Name, ".")+1:]
		sub := ""
		if q.Subcluster != "" {
			sub = "\t" + q.Subcluster
		}
		if c := q.Capacity; c != nil {
			// A capacity queue: its capacity is its share (SPEC §19).
			name += fmt.Sprintf(" [capacity %g%%, max %g%%, used %.0f%%]", c.Capacity, c.MaxCapacity, c.UsedCapacity)
		}
		fmt.Fprintf(w, "%s\t%s\t%g\t%s\t%s\t%s\t%s\t%s\t%s\t%d%s\n", name, q.Policy, q.Weight,
			formatMin(q.MinResources), formatMax(q.MaxResources), short(q.SteadyFairShare), short(q.InstantaneousFairShare),
			short(q.Used), short(q.Pending), q.RunningApps, sub)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if note := resp.StaleNote(); note != "" {
		fmt.Fprintln(stdout, "\nNote:", note)
	}
	return nil
}

func runQueueStatus(args []string) error {
	cf, pos, err := clientCommand("queue status", args, 1, "weft queue status [-address ADDR] [-json] [-stale] QUEUE", nil)
	if err != nil {
		return err
	}
	req := rpc.QueueStatusRequest{RequestHeader: cf.header(), Name: pos[0]}
	var resp rpc.QueueStatusResponse
	if err := cf.call("Queue.Status", &req, &resp); err != nil {
		return err
	}
	noteUnreachable(resp.Unreachable)
	if cf.json {
		if len(resp.Subclusters) > 0 {
			return printJSON(resp)
		}
		return printJSON(resp.Queue)
	}
	q := resp.Queue
	kind := "parent"
	if q.Leaf {
		kind = "leaf (apps may be submitted here)"
	}
	w := table()
	fmt.Fprintf(w, "Name\t%s\n", q.Name)
	fmt.Fprintf(w, "Kind\t%s\n", kind)
	if len(q.Children) > 0 {
		fmt.Fprintf(w, "Children\t%s\n", strings.Join(q.Children, ", "))
	}
	fmt.Fprintf(w, "Policy\t%s\n", q.Policy)
	fmt.Fprintf(w, "Weight\t%g\n", q.Weight)
	fmt.Fprintf(w, "Min resources\t%s\n", formatMin(q.MinResources))
	fmt.Fprintf(w, "Max resources\t%s\n", formatMax(q.MaxResources))
	fmt.Fprintf(w, "Max running apps\t%s\n", formatMaxApps(q.MaxRunningApps))
	fmt.Fprintf(w, "Steady fair share\t%s\n", q.SteadyFairShare)
	fmt.Fprintf(w, "Instantaneous fair share\t%s\n", q.InstantaneousFairShare)
	fmt.Fprintf(w, "Used\t%s\n", q.Used)
	fmt.Fprintf(w, "Pending\t%s\n", q.Pending)
	fmt.Fprintf(w, "Running apps\t%d\n", q.RunningApps)
	if c := q.Capacity; c != nil {
		// A capacity queue: YARN's knobs, not fair sharing's.
		fmt.Fprintf(w, "Capacity\t%g%% of its parent (%g%% of the subtree), %g%% of it used\n", c.Capacity, c.AbsoluteCapacity, c.UsedCapacity)
		fmt.Fprintf(w, "Max capacity\t%g%% of its parent (%g%% of the subtree)\n", c.MaxCapacity, c.AbsoluteMaxCapacity)
		ulf := fmt.Sprintf("%g", c.UserLimitFactor)
		if c.UserLimitFactor == scheduler.UserLimitOff {
			ulf = "-1 (none short of max capacity)"
		}
		fmt.Fprintf(w, "User limit\tfactor %s, minimum %g%% per active user\n", ulf, c.MinimumUserLimitPercent)
		fmt.Fprintf(w, "AM limit\t%g of its max capacity (maximum_am_resource_percent)\n", c.MaximumAMResourcePercent)
	} else {
		fmt.Fprintf(w, "Preemptable\t%v\n", q.Preemptable)
		fmt.Fprintf(w, "Fair-share preemption\tthreshold %g, timeout %s\n", q.FairSharePreemptionThreshold, q.FairSharePreemptionTimeout)
		fmt.Fprintf(w, "Min-share preemption\ttimeout %s\n", q.MinSharePreemptionTimeout)
		fmt.Fprintf(w, "Max AM share\t%s\n", formatMaxAMShare(q.MaxAMShare))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(resp.Subclusters) == 0 {
		return nil
	}
	fmt.Fprintln(stdout, "\nIn each sub-cluster (the figures above are their totals):")
	w = table()
	fmt.Fprintln(w, "SUB-CLUSTER\tSTEADY FAIR SHARE\tINSTANT FAIR SHARE\tUSED\tPENDING\tAPPS")
	for _, s := range resp.Subclusters {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\n", s.Subcluster, short(s.SteadyFairShare), short(s.InstantaneousFairShare),
			short(s.Used), short(s.Pending), s.RunningApps)
	}
	return w.Flush()
}

func formatMaxAMShare(f float64) string {
	if f == scheduler.MaxAMShareOff {
		return "off"
	}
	return fmt.Sprintf("%g of the fair share", f)
}

func formatMin(r scheduler.Resources) string {
	if r.IsZero() {
		return "-"
	}
	return r.String()
}

func formatMax(r *scheduler.Resources) string {
	if r == nil {
		return "unlimited"
	}
	return r.String()
}

func formatMaxApps(n *int) string {
	if n == nil {
		return "unlimited"
	}
	return fmt.Sprint(*n)
}

// short formats resources compactly for tables: "4096M/4c" plus extended.
func short(r scheduler.Resources) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%dM/%dc", r.MemoryMB, r.Vcores)
	for _, n := range r.Names()[2:] {
		fmt.Fprintf(&b, "/%d %s", r.Get(n), n)
	}
	return b.String()
}

// printQueuePlan shows a dry run's plan: a table of fair shares now and
// after, then the apps that would become preemptable; -json prints the
// plan itself.
func printQueuePlan(cf *clientFlags, name string, resp rpc.QueueApplyResponse) error {
	plan := resp.Plan
	if plan == nil {
		return fmt.Errorf("the server answered the dry run without a plan; is it older than this weft?")
	}
	if cf.json {
		return printJSON(plan)
	}
	for _, w := range resp.Warnings {
		fmt.Fprintln(stderr, "Warning: "+w)
	}
	fmt.Fprintf(stdout, "Dry run of %s: nothing was changed. Fair shares now -> after:\n\n", name)
	w := table()
	fmt.Fprintln(w, "QUEUE\tSTEADY FAIR SHARE\tINSTANT FAIR SHARE")
	for _, q := range plan.Queues {
		label := q.Name
		if q.Subcluster != "" {
			label = q.Subcluster + ": " + label
		}
		switch {
		case q.Added:
			label += " (new)"
		case q.Removed:
			label += " (removed)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", label, shareChange(q.SteadyFairShareNow, q.SteadyFairShareAfter, q.Added, q.Removed),
			shareChange(q.InstantaneousFairShareNow, q.InstantaneousFairShareAfter, q.Added, q.Removed))
	}
	w.Flush()
	if len(plan.Preemptable) == 0 {
		fmt.Fprintln(stdout, "\nNo running app would become preemptable.")
		return nil
	}
	fmt.Fprintf(stdout, "\n%d running app(s) would become preemptable (over their fair share):\n", len(plan.Preemptable))
	w = table()
	fmt.Fprintln(w, "APP\tQUEUE\tUSED\tFAIR SHARE")
	for _, a := range plan.Preemptable {
		queue := a.Queue
		if a.Subcluster != "" {
			queue = a.Subcluster + ": " + queue
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s -> %s\n", a.AppID, queue, short(a.Used), short(a.FairShareNow), short(a.FairShareAfter))
	}
	return w.Flush()
}

// shareChange shows a share before and after, or one side of it for a
// queue added or removed.
func shareChange(now, after scheduler.Resources, added, removed bool) string {
	switch {
	case added:
		return "- -> " + short(after)
	case removed:
		return short(now) + " -> -"
	case now.String() == after.String():
		return short(now) + " (same)"
	}
	return short(now) + " -> " + short(after)
}

// runQueueImport writes the queue file equivalent to a YARN
// capacity-scheduler.xml and names what it could not carry over.
func runQueueImport(args []string) error {
	fs := newFlagSet("queue import")
	out, asJSON := "", false
	fs.StringVar(&out, "o", "", "write the queue file here instead of to stdout")
	fs.BoolVar(&asJSON, "json", false, "print {\"hcl\", \"not_carried_over\"} as JSON")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("usage: weft queue import [-o FILE] [-json] capacity-scheduler.xml")
	}
	f, err := os.Open(pos[0])
	if err != nil {
		return err
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, config.MaxCapacitySchedulerXML+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", pos[0], err)
	}
	im, err := config.ImportCapacityScheduler(pos[0], src)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(im)
	}
	if out != "" {
		if err := os.WriteFile(out, []byte(im.HCL), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", out)
	} else {
		fmt.Fprint(stdout, im.HCL)
	}
	for _, s := range im.Skipped {
		fmt.Fprintf(stderr, "not carried over: %s\n", s)
	}
	return nil
}
