package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/weft-sched/weft/internal/config"
	"github.com/weft-sched/weft/rpc"
)

func runFederation(args []string) error {
	return subcommand("federation", args, map[string]func([]string) error{
		"subclusters": runFederationSubclusters,
		"subcluster":  runFederationSubcluster,
		"policy":      runFederationPolicy,
	})
}

func runFederationSubcluster(args []string) error {
	admin := func(action string) func([]string) error {
		return func(args []string) error { return runFederationSubclusterAdmin(action, args) }
	}
	return subcommand("federation subcluster", args, map[string]func([]string) error{
		"decommission": admin("decommission"),
		"recommission": admin("recommission"),
		"forget":       admin("forget"),
	})
}

func runFederationSubclusterAdmin(action string, args []string) error {
	cf, pos, err := clientCommand("federation subcluster "+action, args, 1, "weft federation subcluster "+action+" [-address ROUTER] ID", nil)
	if err != nil {
		return err
	}
	req := rpc.FederationSubclusterAdminRequest{RequestHeader: cf.header(), ID: pos[0], Action: action}
	var resp rpc.FederationSubclusterAdminResponse
	if err := cf.call("Federation.SubclusterAdmin", &req, &resp); err != nil {
		return err
	}
	if cf.json {
		return printJSON(resp)
	}
	if resp.Subcluster == nil {
		fmt.Fprintf(stdout, "Sub-cluster %s forgotten\n", pos[0])
		return nil
	}
	fmt.Fprintf(stdout, "Sub-cluster %s is %s\n", pos[0], resp.Subcluster.State)
	return nil
}

func runFederationPolicy(args []string) error {
	return subcommand("federation policy", args, map[string]func([]string) error{
		"apply": runFederationPolicyApply,
		"list":  runFederationPolicyList,
	})
}

func runFederationSubclusters(args []string) error {
	cf, _, err := clientCommand("federation subclusters", args, 0, "weft federation subclusters [-address ROUTER] [-json] [-stale]", nil)
	if err != nil {
		return err
	}
	req := rpc.FederationSubclustersRequest{RequestHeader: cf.header()}
	var resp rpc.FederationSubclustersResponse
	if err := cf.call("Federation.Subclusters", &req, &resp); err != nil {
		return err
	}
	if cf.json {
		return printJSON(orEmpty(resp.Subclusters))
	}
	w := table()
	fmt.Fprintln(w, "ID\tSTATE\tCAPACITY\tUSED\tPENDING\tNODES\tAPPS\tHOMES\tUNMANAGED AMS\tLAST HEARTBEAT\tSERVERS")
	now := time.Now()
	for _, sc := range resp.Subclusters {
		last := "never"
		if sc.LastHeartbeat > 0 {
			last = now.Sub(time.Unix(0, sc.LastHeartbeat)).Round(time.Second).String() + " ago"
		}
		state := string(sc.State)
		if sc.Reason != "" {
			state += " (" + sc.Reason + ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%d\t%d\t%d\t%s\t%s\n", sc.ID, state, short(sc.Capacity), short(sc.Used),
			short(sc.Pending), sc.NodesReady, sc.NodesTotal, sc.AppsRunning, sc.Homes, sc.UnmanagedAMs, last, strings.Join(sc.Servers, ","))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	printStaleNote(cf, &resp.ResponseMeta)
	return nil
}

func runFederationPolicyApply(args []string) error {
	var replace bool
	cf, pos, err := clientCommand("federation policy apply", args, 1, "weft federation policy apply [-replace] [-address ROUTER] FILE",
		func(fs *flag.FlagSet) {
			fs.BoolVar(&replace, "replace", false, "replace every policy with the file's (queues it leaves out lose theirs)")
		})
	if err != nil {
		return err
	}
	src, err := os.ReadFile(pos[0])
	if err != nil {
		return err
	}
	policies, err := config.ParsePolicies(pos[0], src)
	if err != nil {
		return err
	}
	req := rpc.FederationPolicyApplyRequest{RequestHeader: cf.header(), Policies: policies, Replace: replace}
	var resp rpc.FederationPolicyApplyResponse
	if err := cf.call("Federation.PolicyApply", &req, &resp); err != nil {
		return err
	}
	if cf.json {
		return printJSON(resp)
	}
	noun := "policies"
	if len(policies) == 1 {
		noun = "policy"
	}
	fmt.Fprintf(stdout, "Applied %d %s from %s; the federation holds %d (index %d)\n", len(policies), noun, pos[0], resp.Policies, resp.Index)
	return nil
}

func runFederationPolicyList(args []string) error {
	cf, _, err := clientCommand("federation policy list", args, 0, "weft federation policy list [-address ROUTER] [-json] [-stale]", nil)
	if err != nil {
		return err
	}
	req := rpc.FederationPolicyListRequest{RequestHeader: cf.header()}
	var resp rpc.FederationPolicyListResponse
	if err := cf.call("Federation.PolicyList", &req, &resp); err != nil {
		return err
	}
	if cf.json {
		return printJSON(resp)
	}
	generated := map[string]map[string]uint32{}
	for _, g := range resp.Generated {
		generated[g.Queue] = g.Weights
	}
	w := table()
	fmt.Fprintln(w, "QUEUE\tROUTER\tAMRMPROXY\tWEIGHTS")
	for _, p := range resp.Policies {
		queue := p.Queue
		if queue == "" {
			queue = "(default)"
		}
		weights := formatWeights(p.Weights)
		if len(p.Weights) == 0 {
			weights = "generated: " + formatWeights(generated[p.Queue])
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", queue, p.Router, orDash(string(p.AMRMProxy)), weights)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	printStaleNote(cf, &resp.ResponseMeta)
	return nil
}

func formatWeights(w map[string]uint32) string {
	if len(w) == 0 {
		return "none yet (equal)"
	}
	ids := make([]string, 0, len(w))
	for id := range w {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%s=%d", id, w[id])
	}
	return strings.Join(parts, " ")
}
