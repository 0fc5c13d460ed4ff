package main

import (
	"fmt"
	"time"

	"github.com/weft-sched/weft/rpc"
)

func runNode(args []string) error {
	return subcommand("node", args, map[string]func([]string) error{
		"list":         runNodeList,
		"status":       runNodeStatus,
		"reset-secret": runNodeResetSecret,
	})
}

func runNodeList(args []string) error {
	cf, _, err := clientCommand("node list", args, 0, "weft node list [-json] [-stale]", nil)
	if err != nil {
		return err
	}
	h := cf.header()
	var resp rpc.NodeListResponse
	if err := cf.call("Node.List", &h, &resp); err != nil {
		return err
	}
	printStaleNote(cf, &resp.ResponseMeta)
	if cf.json {
		return printJSON(orEmpty(resp.Nodes))
	}
	w := table()
	fmt.Fprintln(w, "ID\tADDRESS\tRACK\tSTATUS\tCAPACITY\tALLOCATED (G)\tRUNNING (G)\tRUNNING (O)\tMEMORY (O)\tVCORES (O)\tQUEUED")
	for _, n := range resp.Nodes {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n", n.ID, n.Address, n.Rack, n.Status, n.Capacity,
			n.AllocatedGuaranteed, n.RunningGuaranteed, n.RunningOpportunistic,
			n.AllocatedOpportunistic.MemoryMB, n.AllocatedOpportunistic.Vcores, n.Queued)
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
	fmt.Fprintf(w, "Epoch\t%d\n", n.Epoch)
	fmt.Fprintf(w, "Capacity\t%s\n", n.Capacity)
	fmt.Fprintf(w, "Allocated (G)\t%s, %d running\n", n.AllocatedGuaranteed, n.RunningGuaranteed)
	fmt.Fprintf(w, "Allocated (O)\t%s, %d running, %d queued\n", n.AllocatedOpportunistic, n.RunningOpportunistic, n.Queued)
	if n.EstimatedQueueWait > 0 {
		fmt.Fprintf(w, "Queue wait\t~%s (estimated)\n", n.EstimatedQueueWait.Round(100*time.Millisecond))
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
