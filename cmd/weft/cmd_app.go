package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/user"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/weft-sched/weft/am"
	"github.com/weft-sched/weft/internal/config"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

func runApp(args []string) error {
	return subcommand("app", args, map[string]func([]string) error{
		"submit": runAppSubmit,
		"list":   runAppList,
		"status": runAppStatus,
		"kill":   runAppKill,
		"wait":   runAppWait,
		"logs":   runAppLogs,
	})
}

const submitUsage = "weft app submit [flags] -- CMD ARGS… | weft app submit [-type mapreduce] -spec FILE [flags]"

func runAppSubmit(args []string) error {
	spec, cf, wait, err := parseSubmit(args)
	if err != nil {
		return err
	}
	var resp rpc.AppSubmitResponse
	if err := cf.call("App.Submit", &rpc.AppSubmitRequest{Spec: spec}, &resp); err != nil {
		return err
	}
	if cf.json && !wait {
		return printJSON(resp)
	}
	if !cf.json {
		fmt.Fprintf(stdout, "Submitted %s to %s\n", resp.AppID, queuePath(spec.Queue))
	}
	if !wait {
		return nil
	}
	return waitApp(cf, resp.AppID)
}

// parseSubmit reads the arguments of app submit (and the -spec file) into
// the validated spec to submit, the client flags and -wait; it contacts
// no server.
func parseSubmit(args []string) (spec scheduler.AppSpec, cf *clientFlags, wait bool, err error) {
	var specFile, containerType, amType string
	var memMB, vcores, amMemMB, amVcores int64
	var prio, perNode int
	var relax bool
	cf = &clientFlags{}
	fs := newFlagSet("app submit")
	cf.register(fs)
	fs.StringVar(&specFile, "spec", "", "app spec `FILE` (HCL or JSON); flags given as well override the file")
	fs.StringVar(&amType, "type", "", "application master: dshell (the default), or mapreduce for a -spec file's mapreduce job")
	fs.StringVar(&spec.Name, "name", "", "app `NAME` (default: the command)")
	fs.StringVar(&spec.Queue, "queue", "", "leaf `QUEUE` (default root.default)")
	fs.StringVar(&spec.User, "user", "", "submitting `USER` (default: you)")
	fs.IntVar(&prio, "priority", 0, "app `PRIORITY` (higher runs first)")
	fs.IntVar(&spec.DShell.NumContainers, "num-containers", 1, "how many containers run the command")
	fs.StringVar(&containerType, "container-type", string(scheduler.Guaranteed), "GUARANTEED or OPPORTUNISTIC")
	fs.Int64Var(&memMB, "memory-mb", 128, "memory of each container in `MiB`")
	fs.Int64Var(&vcores, "vcores", 1, "virtual cores of each container")
	fs.Int64Var(&amMemMB, "am-memory-mb", scheduler.DefaultAMMemoryMB, "memory of the AM container in `MiB`")
	fs.Int64Var(&amVcores, "am-vcores", scheduler.DefaultAMVcores, "virtual cores of the AM container")
	fs.IntVar(&spec.MaxAMAttempts, "max-am-attempts", scheduler.DefaultMaxAMAttempts, "AM attempts before the app fails")
	fs.IntVar(&perNode, "max-failures-per-node", scheduler.DefaultMaxFailuresPerNode,
		"containers that may fail on one node (would not start, lost, never started) before the AM blacklists it for the app; 0 never blacklists")
	fs.BoolVar(&spec.DShell.PromoteOpportunisticAfterStart, "promote-opportunistic-after-start", false, "ask to promote each opportunistic container once it runs")
	fs.BoolVar(&spec.DShell.EnforceExecutionType, "enforce-execution-type", false, "never accept a container of another execution type")
	fs.DurationVar(&spec.DShell.ExpectedDuration, "expected-duration", 0, "how long each container is expected to run, a hint for nodes whose opportunistic queue runs the shortest first")
	fs.Var((*commaList)(&spec.DShell.Nodes), "nodes", "run the containers on these `NODES` (comma-separated node IDs; may repeat)")
	fs.Var((*commaList)(&spec.DShell.Racks), "racks", "run the containers on these `RACKS` (comma-separated; may repeat)")
	fs.BoolVar(&relax, "relax-locality", true, "with -nodes or -racks: after the locality delays, let containers go to the nodes' racks, then anywhere; "+
		"false holds them to what is named")
	fs.BoolVar(&wait, "wait", false, "wait for the app to end; exit 1 unless it FINISHED")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return spec, nil, false, err
	}
	if _, err := cf.addresses(); err != nil {
		return spec, nil, false, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	spec.Priority = int32(prio)
	spec.DShell.ExecutionType = scheduler.ExecutionType(strings.ToUpper(containerType))
	spec.DShell.Resources = scheduler.Resources{MemoryMB: memMB, Vcores: vcores}
	spec.AMResources = scheduler.Resources{MemoryMB: amMemMB, Vcores: amVcores}
	if set["max-failures-per-node"] {
		spec.MaxFailuresPerNode = &perNode
	}
	if set["relax-locality"] {
		// Only when given: left out, the spec file's relax_locality holds,
		// and without one the servers relax, as the flag's default says.
		spec.DShell.RelaxLocality = &relax
	}
	if specFile != "" {
		if len(pos) > 0 {
			return spec, nil, false, usagef("give the command in the -spec file or after --, not both")
		}
		src, err := os.ReadFile(specFile)
		if err != nil {
			return spec, nil, false, fmt.Errorf("read %s: %w", specFile, err)
		}
		file, err := config.ParseAppSpec(specFile, src)
		if err != nil {
			return spec, nil, false, fmt.Errorf("%v; nothing was submitted", err)
		}
		spec = mergeSpec(file, spec, set)
		if err := checkSubmitType(amType, spec.AMType, set); err != nil {
			return spec, nil, false, err
		}
	} else {
		if amType == scheduler.AMTypeMapReduce {
			return spec, nil, false, usagef("-type mapreduce: give the job in a -spec file's mapreduce block (see examples/wordcount)")
		}
		if len(pos) == 0 {
			return spec, nil, false, usagef("usage: %s", submitUsage)
		}
		spec.DShell.Command = pos
	}
	if spec.User == "" && cf.token == "" {
		// With a token, the servers run the app as the token's name.
		spec.User = currentUser()
	}
	spec.SetDefaults()
	if err := spec.Validate(); err != nil {
		return spec, nil, false, usagef("invalid app: %v", err)
	}
	return spec, cf, wait, nil
}

// dshellFlags are the flags that describe a dshell app's containers.
var dshellFlags = []string{"num-containers", "container-type", "memory-mb", "vcores", "promote-opportunistic-after-start",
	"enforce-execution-type", "nodes", "racks", "relax-locality", "expected-duration"}

// checkSubmitType checks -type against the spec file's AM type, and that
// no dshell flag is given for a mapreduce job.
func checkSubmitType(flagType, fileType string, set map[string]bool) error {
	switch {
	case flagType != "" && flagType != scheduler.AMTypeDShell && flagType != scheduler.AMTypeMapReduce:
		return usagef("-type: %q is not dshell or mapreduce", flagType)
	case flagType == scheduler.AMTypeMapReduce && fileType != scheduler.AMTypeMapReduce:
		return usagef("-type mapreduce: the -spec file has no mapreduce block")
	case flagType == scheduler.AMTypeDShell && fileType != scheduler.AMTypeDShell:
		return usagef("-type dshell: the -spec file holds a %s job", fileType)
	}
	if fileType == scheduler.AMTypeMapReduce {
		for _, f := range dshellFlags {
			if set[f] {
				return usagef("-%s: a mapreduce job sizes and places its tasks in its spec (map_resources, split nodes); the flag is for dshell apps", f)
			}
		}
	}
	return nil
}

// mergeSpec is a -spec file with the flags given on the command line (set)
// laid over it.
func mergeSpec(file, flags scheduler.AppSpec, set map[string]bool) scheduler.AppSpec {
	out := file
	pick := func(name string, apply func()) {
		if set[name] {
			apply()
		}
	}
	pick("name", func() { out.Name = flags.Name })
	pick("queue", func() { out.Queue = flags.Queue })
	pick("user", func() { out.User = flags.User })
	pick("priority", func() { out.Priority = flags.Priority })
	pick("max-am-attempts", func() { out.MaxAMAttempts = flags.MaxAMAttempts })
	pick("max-failures-per-node", func() { out.MaxFailuresPerNode = flags.MaxFailuresPerNode })
	pick("num-containers", func() { out.DShell.NumContainers = flags.DShell.NumContainers })
	pick("container-type", func() { out.DShell.ExecutionType = flags.DShell.ExecutionType })
	pick("memory-mb", func() {
		out.DShell.Resources = out.DShell.Resources.With(scheduler.ResourceMemoryMB, flags.DShell.Resources.MemoryMB)
	})
	pick("vcores", func() {
		out.DShell.Resources = out.DShell.Resources.With(scheduler.ResourceVcores, flags.DShell.Resources.Vcores)
	})
	pick("am-memory-mb", func() { out.AMResources = out.AMResources.With(scheduler.ResourceMemoryMB, flags.AMResources.MemoryMB) })
	pick("am-vcores", func() { out.AMResources = out.AMResources.With(scheduler.ResourceVcores, flags.AMResources.Vcores) })
	pick("promote-opportunistic-after-start", func() {
		out.DShell.PromoteOpportunisticAfterStart = flags.DShell.PromoteOpportunisticAfterStart
	})
	pick("enforce-execution-type", func() { out.DShell.EnforceExecutionType = flags.DShell.EnforceExecutionType })
	pick("expected-duration", func() { out.DShell.ExpectedDuration = flags.DShell.ExpectedDuration })
	pick("nodes", func() { out.DShell.Nodes = flags.DShell.Nodes })
	pick("racks", func() { out.DShell.Racks = flags.DShell.Racks })
	pick("relax-locality", func() { out.DShell.RelaxLocality = flags.DShell.RelaxLocality })
	return out
}

// queuePath is the leaf an app submitted to queue goes to, as the servers
// resolve it.
func queuePath(queue string) string {
	switch {
	case queue == "":
		return scheduler.DefaultQueue
	case queue == scheduler.RootQueue || strings.HasPrefix(queue, scheduler.RootQueue+"."):
		return queue
	}
	return scheduler.RootQueue + "." + queue
}

func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return os.Getenv("USER")
}

func runAppList(args []string) error {
	var req rpc.AppListRequest
	cf, _, err := clientCommand("app list", args, 0, "weft app list [-queue Q] [-state S] [-user U]", func(fs *flag.FlagSet) {
		fs.StringVar(&req.Queue, "queue", "", "only apps in `QUEUE`")
		fs.StringVar(&req.State, "state", "", "only apps in `STATE`: SUBMITTED, ACCEPTED, RUNNING, FINISHED, FAILED or KILLED")
		fs.StringVar(&req.User, "user", "", "only apps of `USER`")
	})
	if err != nil {
		return err
	}
	if _, err := scheduler.ParseAppState(req.State); err != nil {
		return usagef("-state: %v", err)
	}
	req.RequestHeader = cf.header()
	var resp rpc.AppListResponse
	if err := cf.call("App.List", &req, &resp); err != nil {
		return err
	}
	sort.Slice(resp.Apps, func(i, j int) bool { return scheduler.CompareIDs(resp.Apps[i].ID, resp.Apps[j].ID) < 0 })
	printStaleNote(cf, &resp.ResponseMeta)
	noteUnreachable(resp.Unreachable)
	if cf.json {
		return printJSON(orEmpty(resp.Apps))
	}
	if len(resp.Apps) == 0 {
		fmt.Fprintln(stdout, "No apps"+filterNote("queue", req.Queue, "state", req.State, "user", req.User)+".")
		return nil
	}
	w := table()
	home := func(a rpc.AppInfo) string { return "" }
	header := "ID\tNAME\tQUEUE\tUSER\tSTATE\tCONTAINERS (R/C)\tAM ATTEMPTS"
	if len(resp.Apps) > 0 && resp.Apps[0].Home != "" { // a federation's router answered
		header += "\tHOME"
		home = func(a rpc.AppInfo) string { return "\t" + a.Home }
	}
	fmt.Fprintln(w, header)
	for _, a := range resp.Apps {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%d%s\n", a.ID, a.Name, a.Queue, a.User, a.State,
			a.Containers.Running, a.Containers.Completed, a.AMAttempts, home(a))
	}
	return w.Flush()
}

func runAppStatus(args []string) error {
	cf, pos, err := clientCommand("app status", args, 1, "weft app status [-json] APP", nil)
	if err != nil {
		return err
	}
	var resp rpc.AppStatusResponse
	if err := cf.call("App.Status", &rpc.AppRequest{RequestHeader: cf.header(), AppID: pos[0]}, &resp); err != nil {
		return explainAppNotFound(err)
	}
	printStaleNote(cf, &resp.ResponseMeta)
	if cf.json {
		return printJSON(resp.App)
	}
	printApp(resp.App)
	return nil
}

func printApp(a rpc.AppInfo) {
	w := table()
	fmt.Fprintf(w, "ID\t%s\n", a.ID)
	if a.Home != "" {
		fmt.Fprintf(w, "Home\t%s (sub-cluster)\n", a.Home)
	}
	fmt.Fprintf(w, "Name\t%s\n", a.Name)
	fmt.Fprintf(w, "Queue\t%s\n", a.Queue)
	fmt.Fprintf(w, "User\t%s\n", a.User)
	fmt.Fprintf(w, "Priority\t%d\n", a.Priority)
	fmt.Fprintf(w, "State\t%s\n", a.State)
	if a.Diagnostics != "" {
		fmt.Fprintf(w, "Diagnostics\t%s\n", a.Diagnostics)
	}
	fmt.Fprintf(w, "Submitted\t%s\n", time.Unix(0, a.SubmittedAt).Format(time.RFC3339))
	if a.FinishedAt > 0 {
		fmt.Fprintf(w, "Finished\t%s (after %s)\n", time.Unix(0, a.FinishedAt).Format(time.RFC3339),
			time.Duration(a.FinishedAt-a.SubmittedAt).Round(time.Millisecond))
	}
	c := a.Containers
	fmt.Fprintf(w, "Containers\t%d allocated, %d queued, %d running, %d completed\n", c.Allocated, c.Queued, c.Running, c.Completed)
	if a.UnmanagedFor != "" {
		fmt.Fprintf(w, "Unmanaged\tthe app's AM runs in sub-cluster %s; this is its part here\n", a.UnmanagedFor)
	}
	for _, p := range a.Spans {
		role := "span"
		if p.Home {
			role = "home"
		}
		line := fmt.Sprintf("%d allocated, %d queued, %d running, %d completed (%s, %s)", p.Containers.Allocated, p.Containers.Queued,
			p.Containers.Running, p.Containers.Completed, role, p.State)
		if p.Unreachable != "" {
			line = fmt.Sprintf("not included (%s): %s", role, p.Unreachable)
		}
		fmt.Fprintf(w, "  in %s\t%s\n", p.Subcluster, line)
	}
	if !a.Pending.IsZero() {
		fmt.Fprintf(w, "Pending\t%s\n", a.Pending)
	}
	if a.WhyPending != nil {
		fmt.Fprintf(w, "Why pending\t%s (%s)\n", a.WhyPending.Message, a.WhyPending.Code)
	}
	for _, r := range a.Reservations {
		fmt.Fprintf(w, "Reserved\t%s for %s of %s, since %s\n", r.NodeID, r.Resources, reservedWhat(r),
			time.Unix(0, r.Since).Format(time.RFC3339))
	}
	if a.Headroom != nil {
		fmt.Fprintf(w, "Headroom\t%s (what user %s may still be given in %s)\n", a.Headroom, a.User, a.Queue)
	}
	for _, at := range a.Attempts {
		line := fmt.Sprintf("%s on %s", at.ContainerID, at.NodeID)
		if at.Diagnostics != "" {
			line += ": " + at.Diagnostics
		}
		fmt.Fprintf(w, "AM attempt %d\t%s\n", at.Attempt, line)
	}
	for _, p := range a.Preemptions {
		fmt.Fprintf(w, "Preempted\t%s: %s (for %s)\n", p.ContainerID, p.Reason, p.ForApp)
	}
	if len(a.Blacklist) > 0 {
		note := fmt.Sprintf("after %d failures on each", a.MaxFailuresPerNode)
		if a.BlacklistIgnored {
			note = fmt.Sprintf("ignored: it names %d%% or more of the READY nodes", scheduler.BlacklistIgnorePercent)
		}
		fmt.Fprintf(w, "Blacklisted nodes\t%s (%s)\n", strings.Join(a.Blacklist, ", "), note)
	}
	w.Flush()
	printJobSummary(a.Counters)
	printCounters(a.Counters)
}

// printJobSummary prints what a MapReduce job's counters say (SPEC §19),
// when they are a MapReduce job's: progress, map locality, the shuffle by
// distance and the network distance of the reduces.
func printJobSummary(c scheduler.Counters) {
	if _, ok := c[am.CounterMaps]; !ok {
		return
	}
	pct := func(n, of int64) string {
		if of == 0 {
			return ""
		}
		return fmt.Sprintf(" (%.0f%%)", 100*float64(n)/float64(of))
	}
	fmt.Fprintf(stdout, "%-14s%d of %d maps and %d of %d reduces done", "Job",
		c[am.CounterMapsDone], c[am.CounterMaps], c[am.CounterReducesDone], c[am.CounterReduces])
	if ms, ok := c[am.CounterJobMS]; ok {
		fmt.Fprintf(stdout, " in %s (maps %s)", time.Duration(ms)*time.Millisecond, time.Duration(c[am.CounterMapPhaseMS])*time.Millisecond)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintf(stdout, "%-14s%d data-local, %d rack-local, %d off-rack", "Maps",
		c[am.CounterMapsDataLocal], c[am.CounterMapsRackLocal], c[am.CounterMapsOffRack])
	if n := c[am.CounterMapsAnywhere]; n > 0 {
		fmt.Fprintf(stdout, ", %d naming no node", n)
	}
	if n := c[am.CounterMapsLostRerun]; n > 0 {
		fmt.Fprintf(stdout, "; %d run again for lost output", n)
	}
	fmt.Fprintln(stdout)
	node, rack, off := c[am.CounterShuffleNode], c[am.CounterShuffleRack], c[am.CounterShuffleOffRack]
	total := node + rack + off
	fmt.Fprintf(stdout, "%-14s%s bytes: %s node-local%s, %s rack-local%s, %s off-rack%s\n", "Shuffle", thousands(total),
		thousands(node), pct(node, total), thousands(rack), pct(rack, total), thousands(off), pct(off, total))
	fmt.Fprintf(stdout, "%-14sTND %s, WTND %s (bytes × distance; 0 same node, 2 same rack, 4 across racks)\n", "Distance",
		thousands(c[am.CounterShuffleTND]), thousands(c[am.CounterShuffleWTND]))
}

// printCounters prints an app's counters (SPEC §19), if it has any: by
// name (so those sharing a first dot-separated part stand together),
// values aligned on the right with thousands separated.
func printCounters(c scheduler.Counters) {
	if len(c) == 0 {
		return
	}
	names := slices.Sorted(maps.Keys(c))
	values := make([]string, len(names))
	nameWidth, valueWidth := 0, 0
	for i, name := range names {
		values[i] = thousands(c[name])
		nameWidth, valueWidth = max(nameWidth, len(name)), max(valueWidth, len(values[i]))
	}
	fmt.Fprintln(stdout, "Counters:")
	for i, name := range names {
		fmt.Fprintf(stdout, "  %-*s  %*s\n", nameWidth, name, valueWidth, values[i])
	}
}

// thousands writes n with a comma between each group of three digits.
func thousands(n int64) string {
	digits := strconv.FormatInt(n, 10)
	sign := ""
	if n < 0 {
		sign, digits = "-", digits[1:]
	}
	var b strings.Builder
	for i, d := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	return sign + b.String()
}

// explainAppNotFound adds to a not-found answer for an app that it may
// have finished and been garbage collected (SPEC §20), which an operator
// who saw it in a list a while ago would otherwise not guess.
func explainAppNotFound(err error) error {
	if rpc.IsNotFound(err) {
		return fmt.Errorf("%w (finished apps are removed past max_completed_apps or app_gc_threshold; 'weft app list' shows those kept)", err)
	}
	return err
}

func runAppKill(args []string) error {
	cf, pos, err := clientCommand("app kill", args, 1, "weft app kill APP", nil)
	if err != nil {
		return err
	}
	var resp rpc.WriteResponse
	if err := cf.call("App.Kill", &rpc.AppRequest{AppID: pos[0]}, &resp); err != nil {
		return explainAppNotFound(err)
	}
	if cf.json {
		return printJSON(resp)
	}
	if len(resp.Warnings) > 0 {
		fmt.Fprintln(stdout, strings.Join(resp.Warnings, "; "))
		return nil
	}
	fmt.Fprintf(stdout, "Killed %s\n", pos[0])
	return nil
}

func runAppWait(args []string) error {
	cf, pos, err := clientCommand("app wait", args, 1, "weft app wait APP", nil)
	if err != nil {
		return err
	}
	return waitApp(cf, pos[0])
}

// errAppNotFinished makes `app wait` exit 1 for an app that ended badly.
type errAppNotFinished struct{ app rpc.AppInfo }

func (e *errAppNotFinished) Error() string {
	return fmt.Sprintf("app %s ended %s: %s", e.app.ID, e.app.State, e.app.Diagnostics)
}

// waitApp follows an app with blocking queries until it ends, printing a
// line on stderr whenever its state, its containers or why it waits
// change, with the time since it was submitted; it fails unless the app
// FINISHED.
func waitApp(cf *clientFlags, id string) error {
	cl, err := cf.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	var index uint64
	last, lastState := "", ""
	var lastAt time.Time
	for {
		req := &rpc.AppRequest{RequestHeader: cf.header(), AppID: id}
		req.MinQueryIndex, req.MaxWait = index, time.Minute
		var resp rpc.AppStatusResponse
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute+clientBudget)
		err := cl.Call(ctx, "App.Status", req, &resp)
		cancel()
		cf.prog.done()
		if err != nil {
			return explain(err)
		}
		index = resp.Index
		a := resp.App
		line := fmt.Sprintf("%s %s: %d running, %d completed", a.ID, a.State, a.Containers.Running, a.Containers.Completed)
		if why := pendingLine(a); why != "" {
			line += "; " + why
		}
		terminal := scheduler.AppState(a.State).Terminal()
		// A new state is always shown; other news at most once a second.
		if line != last && !cf.json && (a.State != lastState || terminal || time.Since(lastAt) >= time.Second) {
			fmt.Fprintf(stderr, "[%s] %s\n", elapsedSince(a.SubmittedAt), line)
			last, lastState, lastAt = line, a.State, time.Now()
		}
		if terminal {
			if cf.json {
				printJSON(a)
			}
			if a.State != string(scheduler.AppFinished) {
				return &errAppNotFinished{a}
			}
			return nil
		}
	}
}

// elapsedSince formats the time since a Unix-ns instant: tenths of a
// second at first, whole seconds later.
func elapsedSince(ns int64) time.Duration {
	d := time.Since(time.Unix(0, ns))
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// pendingLine says why an app waits, if it does.
func pendingLine(a rpc.AppInfo) string {
	if a.WhyPending != nil {
		return "pending: " + a.WhyPending.Message
	}
	return ""
}
