package main

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"time"

	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

func runContainer(args []string) error {
	return subcommand("container", args, map[string]func([]string) error{
		"list": runContainerList,
		"logs": runContainerLogs,
	})
}

func runContainerList(args []string) error {
	var req rpc.ContainerListRequest
	cf, _, err := clientCommand("container list", args, 0, "weft container list [-app APP] [-node NODE] [-state S]", func(fs *flag.FlagSet) {
		fs.StringVar(&req.AppID, "app", "", "only containers of `APP`")
		fs.StringVar(&req.NodeID, "node", "", "only containers on `NODE`")
		fs.StringVar(&req.State, "state", "", "only containers in `STATE`: ALLOCATED, QUEUED, RUNNING or COMPLETED")
	})
	if err != nil {
		return err
	}
	if _, err := scheduler.ParseContainerState(req.State); err != nil {
		return usagef("-state: %v", err)
	}
	req.RequestHeader = cf.header()
	var resp rpc.ContainerListResponse
	if err := cf.call("Container.List", &req, &resp); err != nil {
		return err
	}
	sort.Slice(resp.Containers, func(i, j int) bool {
		return scheduler.CompareIDs(resp.Containers[i].ID, resp.Containers[j].ID) < 0
	})
	printStaleNote(cf, &resp.ResponseMeta)
	noteUnreachable(resp.Unreachable)
	if cf.json {
		return printJSON(orEmpty(resp.Containers))
	}
	if len(resp.Containers) == 0 {
		fmt.Fprintln(stdout, "No containers"+filterNote("app", req.AppID, "node", req.NodeID, "state", req.State)+".")
		return nil
	}
	w := table()
	fmt.Fprintln(w, "ID\tAPP\tNODE\tTYPE\tSTATE\tEXIT\tREASON\tAM\tRESOURCES")
	for _, c := range resp.Containers {
		exit := "-"
		if c.ExitCode != nil {
			exit = fmt.Sprint(*c.ExitCode)
		}
		am := ""
		if c.IsAM {
			am = "yes"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.ID, c.AppID, c.NodeID, c.ExecutionType, c.State, exit, orDash(c.Reason), am, c.Resources)
	}
	return w.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runContainerLogs(args []string) error {
	lc, err := openLogs("container logs", args, "weft container logs [-stderr] [-f] CONTAINER", "keep printing until the container ends")
	if err != nil {
		return err
	}
	defer lc.cl.Close()
	cf, cl, stream, follow, pos := lc.cf, lc.cl, lc.stream, lc.follow, []string{lc.target}
	var offset int64
	for {
		var resp rpc.ContainerLogsResponse
		ctx, cancel := context.WithTimeout(context.Background(), clientBudget)
		err := cl.Call(ctx, "Container.Logs", &rpc.ContainerLogsRequest{ID: pos[0], Stream: stream, Offset: offset}, &resp)
		cancel()
		cf.prog.done()
		if err != nil {
			return explain(err)
		}
		stdout.Write(resp.Data)
		offset = resp.NextOffset
		if len(resp.Data) == rpc.MaxLogChunk {
			continue
		}
		if !follow || resp.Done {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
}
