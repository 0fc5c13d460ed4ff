package main

import (
	"flag"
	"fmt"
	"sort"
	"time"

	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

func runNode(args []string) error {
	return subcommand("node", args, map[string]func([]string) error{
		"list":         runNodeList,
		"status":       runNodeStatus,
		"reset-secret": runNodeResetSecret,
		"join-token":   runNodeJoinToken,
		"drain":        runNodeDrain,
	})
}

func runNodeList(args []string) error {
	var req rpc.NodeListRequest
	cf, _, err := clientCommand("node list", args, 0, "weft node list [-state S] [-json] [-stale]", func(fs *flag.FlagSet) {
		fs.StringVar(&req.State, "state", "", "only nodes in `STATE`: READY, DRAINING or DOWN")
	})
	if err != nil {
		return err
	}
	if _, err := scheduler.ParseNodeStatus(req.State); err != nil {
		return usagef("-state: %v", err)
	}
	req.RequestHeader = cf.header()
	var resp rpc.NodeListResponse
	if err := cf.call("Node.List", &req, &resp); err != nil {
		return err
	}
	sort.SliceStable(resp.Nodes, func(i, j int) bool { return scheduler.CompareIDs(resp.Nodes[i].ID, resp.Nodes[j].ID) < 0 })
	printStaleNote(cf, &resp.ResponseMeta)
	noteUnreachable(resp.Unreachable)
	if cf.json {
		return printJSON(orEmpty(resp.Nodes))
	}
	if len(resp.Nodes) == 0 {
		fmt.Fprintln(stdout, "No nodes"+filterNote("state", req.State)+".")
		return nil
	}
	w := table()
	header := "ID\tADDRESS\tRACK\tSTATUS\tCAPACITY\tALLOCATED (G)\tRUNNING (G)\tRUNNING (O)\tMEMORY (O)\tVCORES (O)\tQUEUED"
	sub := func(rpc.NodeInfo) string { return "" }
	if resp.Nodes[0].Subcluster != "" { // a federation's router answered
		header += "\tSUB-CLUSTER"
		sub = func(n rpc.NodeInfo) string { return "\t" + n.Subcluster }
	}
	fmt.Fprintln(w, header)
	for _, n := range resp.Nodes {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d%s\n", n.ID, n.Address, n.Rack, n.Status+drainNote(n, time.Now()), n.Capacity,
			n.AllocatedGuaranteed, n.RunningGuaranteed, n.RunningOpportunistic,
			n.AllocatedOpportunistic.MemoryMB, n.AllocatedOpportunistic.Vcores, n.Queued, sub(n))
	}
	return w.Flush()
}

func runNodeStatus(args []string) error {
	cf, pos, err := clientCommand("node status", args, 1, "weft node status [-json] NODE", nil)
	if err != nil {
		return err
	}
	var resp rpc.NodeStatusResponse
	if err := cf.call("Node.Status", &rpc.NodeStatusRequest{RequestHeader: cf.header(), ID: pos[0]}, &resp); err != nil {
		return err
	}
	printStaleNote(cf, &resp.ResponseMeta)
	if cf.json {
		resp.Containers = orEmpty(resp.Containers)
		return printJSON(resp)
	}
	n := resp.Node
	w := table()
	fmt.Fprintf(w, "ID\t%s\n", n.ID)
	fmt.Fprintf(w, "Address\t%s\n", n.Address)
	fmt.Fprintf(w, "Rack\t%s\n", n.Rack)
	status := n.Status
	if n.StatusReason != "" {
		status += " (" + n.StatusReason + ")"
	}
	fmt.Fprintf(w, "Status\t%s\n", status)
	if n.DrainDeadline > 0 {
		fmt.Fprintf(w, "Drain deadline\t%s\n", drainDeadline(n.DrainDeadline, time.Now()))
	}
	fmt.Fprintf(w, "Epoch\t%d\n", n.Epoch)
	fmt.Fprintf(w, "Capacity\t%s\n", n.Capacity)
	fmt.Fprintf(w, "Allocated (G)\t%s, %d running\n", n.AllocatedGuaranteed, n.RunningGuaranteed)
	fmt.Fprintf(w, "Allocated (O)\t%s, %d running, %d queued\n", n.AllocatedOpportunistic, n.RunningOpportunistic, n.Queued)
	if n.EstimatedQueueWait > 0 {
		fmt.Fprintf(w, "Queue wait\t~%s (estimated)\n", n.EstimatedQueueWait.Round(100*time.Millisecond))
	}
	if n.Measured != nil {
		fmt.Fprintf(w, "Used (measured)\t%s of %s allocated\n", *n.Measured, n.AllocatedGuaranteed.Add(n.AllocatedOpportunistic))
	}
	if n.UseLimit != nil {
		fmt.Fprintf(w, "Overcommit\topportunistic containers start while measured use stays within %s\n", *n.UseLimit)
	}
	if n.Enforcement != "" {
		fmt.Fprintf(w, "Limits\t%s\n", n.Enforcement)
	}
	if r := n.Reservation; r != nil {
		fmt.Fprintf(w, "Reserved\tfor %s of %s (%s), %s ago: no other app's container is placed here until it fits\n",
			r.Resources, r.AppID, reservedWhat(r), time.Since(time.Unix(0, r.Since)).Round(time.Second))
	}
	w.Flush()
	if len(resp.Containers) > 0 {
		fmt.Fprintln(stdout, "\nContainers:")
		t := table()
		fmt.Fprintln(t, "ID\tAPP\tTYPE\tSTATE\tRESOURCES")
		for _, c := range resp.Containers {
			fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\n", c.ID, c.AppID, c.ExecutionType, c.State, c.Resources)
		}
		t.Flush()
	}
	return nil
}

// drainNote is what a node list adds to a DRAINING node's status.
func drainNote(n rpc.NodeInfo, now time.Time) string {
	if n.DrainDeadline <= 0 {
		return ""
	}
	return " (until " + drainDeadline(n.DrainDeadline, now) + ")"
}

// drainDeadline shows a drain deadline (Unix ns): the time, and how long
// from now.
func drainDeadline(ns int64, now time.Time) string {
	at := time.Unix(0, ns)
	left := at.Sub(now).Round(time.Second)
	when := "passed"
	if left > 0 {
		when = "in " + left.String()
	}
	return at.UTC().Format("2006-01-02 15:04:05 UTC") + ", " + when
}

func runNodeDrain(args []string) error {
	req := rpc.NodeDrainRequest{Deadline: rpc.DefaultDrainDeadline}
	usage := "weft node drain [-deadline 1h] [-disable] [-json] NODE"
	cf, pos, err := clientCommand("node drain", args, 1, usage, func(fs *flag.FlagSet) {
		fs.DurationVar(&req.Deadline, "deadline", req.Deadline, "kill what still runs on the node after `DURATION`")
		fs.BoolVar(&req.Disable, "disable", false, "end the drain: the node takes containers again")
	})
	if err != nil {
		return err
	}
	if req.Deadline <= 0 {
		return usagef("-deadline: %s is not a duration after now; give one such as 30m or 1h", req.Deadline)
	}
	if err := scheduler.ValidateNodeID(pos[0]); err != nil {
		return usagef("NODE: %v", err)
	}
	req.RequestHeader, req.ID = cf.header(), pos[0]
	var resp rpc.WriteResponse
	if err := cf.call("Node.Drain", &req, &resp); err != nil {
		return err
	}
	if cf.json {
		return printJSON(resp)
	}
	if req.Disable {
		fmt.Fprintf(stdout, "Node %s is READY: it takes containers again.\n", req.ID)
		return nil
	}
	fmt.Fprintf(stdout, "Node %s is DRAINING: it takes no new containers; what still runs there in %s is killed (reason drained) and its apps ask again elsewhere.\n", req.ID, req.Deadline)
	fmt.Fprintf(stdout, "Watch it with 'weft node status %s'; end the drain with 'weft node drain -disable %s'.\n", req.ID, req.ID)
	return nil
}

// reservedWhat names the container a reservation holds a node for.
func reservedWhat(r *rpc.ReservationInfo) string {
	if r.IsAM {
		return fmt.Sprintf("the AM container of attempt %d", r.Attempt)
	}
	return fmt.Sprintf("ask %d", r.AskID)
}
