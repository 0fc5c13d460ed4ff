package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// followInterval is how often `weft app logs -f` looks for new containers
// and new output.
const followInterval = 500 * time.Millisecond

// containerLog is what `weft app logs` has read of one container's stream.
type containerLog struct {
	id      string
	offset  int64
	partial []byte // the start of a line not ended yet
	done    bool   // completed and read to the end, or unreadable
}

// runAppLogs prints every container's logs of an app, each line labelled
// with its container's ID; with -f it follows new containers and output
// until the app has ended and every log is read.
func runAppLogs(args []string) error {
	lc, err := openLogs("app logs", args, "weft app logs [-stderr] [-f] APP", "follow: new containers and new output, until the app has ended")
	if err != nil {
		return err
	}
	defer lc.cl.Close()
	cf, cl, stream, follow, pos := lc.cf, lc.cl, lc.stream, lc.follow, []string{lc.target}
	call := func(method string, args, reply any) error {
		ctx, cancel := context.WithTimeout(context.Background(), clientBudget)
		defer cancel()
		err := cl.Call(ctx, method, args, reply)
		cf.prog.done()
		return explain(err)
	}
	app := pos[0]
	var logs []*containerLog
	known := map[string]bool{}
	for {
		// Whether the app has ended is read before its containers, so that
		// an ended app's list holds every container it had.
		var st rpc.AppStatusResponse
		if err := call("App.Status", &rpc.AppRequest{RequestHeader: cf.header(), AppID: app}, &st); err != nil {
			return err
		}
		ended := scheduler.AppState(st.App.State).Terminal()
		var list rpc.ContainerListResponse
		if err := call("Container.List", &rpc.ContainerListRequest{RequestHeader: cf.header(), AppID: app}, &list); err != nil {
			return err
		}
		for _, c := range list.Containers {
			if !known[c.ID] {
				known[c.ID] = true
				logs = append(logs, &containerLog{id: c.ID})
			}
		}
		width := 0
		for _, l := range logs {
			width = max(width, len(l.id))
		}
		allDone := true
		for _, l := range logs {
			if !l.done {
				readContainerLog(call, l, stream, width, !follow)
			}
			allDone = allDone && l.done
		}
		if !follow || (ended && allDone) {
			return nil
		}
		time.Sleep(followInterval)
	}
}

// readContainerLog prints what a container's stream holds past l.offset,
// line by line with its label. A line not ended yet waits for its end,
// unless the container is done (or final: no more reads will come).
func readContainerLog(call func(string, any, any) error, l *containerLog, stream string, width int, final bool) {
	for {
		var resp rpc.ContainerLogsResponse
		err := call("Container.Logs", &rpc.ContainerLogsRequest{ID: l.id, Stream: stream, Offset: l.offset}, &resp)
		if err != nil {
			fmt.Fprintf(stderr, "%-*s | (cannot read its logs: %v)\n", width, l.id, oneLine(err.Error()))
			l.done = true
			return
		}
		l.offset = resp.NextOffset
		l.partial = append(l.partial, resp.Data...)
		for {
			i := bytes.IndexByte(l.partial, '\n')
			if i < 0 {
				break
			}
			fmt.Fprintf(stdout, "%-*s | %s\n", width, l.id, l.partial[:i])
			l.partial = l.partial[i+1:]
		}
		if len(resp.Data) == rpc.MaxLogChunk {
			continue
		}
		l.done = resp.Done
		if (l.done || final) && len(l.partial) > 0 {
			fmt.Fprintf(stdout, "%-*s | %s\n", width, l.id, l.partial)
			l.partial = nil
		}
		return
	}
}

// logsCommand is what a logs command (app logs, container logs) starts
// from: its flags, its one argument, the stream to read and a client.
type logsCommand struct {
	cf     *clientFlags
	cl     *rpc.Client
	target string
	stream string
	follow bool
}

// openLogs parses a logs command's flags (-stderr, -f with followHelp) and
// its one argument, and connects. The caller closes lc.cl.
func openLogs(name string, args []string, usage, followHelp string) (*logsCommand, error) {
	var stderrStream bool
	lc := &logsCommand{stream: rpc.StreamStdout}
	cf, pos, err := clientCommand(name, args, 1, usage, func(fs *flag.FlagSet) {
		fs.BoolVar(&stderrStream, "stderr", false, "print stderr instead of stdout")
		fs.BoolVar(&lc.follow, "f", false, followHelp)
	})
	if err != nil {
		return nil, err
	}
	if stderrStream {
		lc.stream = rpc.StreamStderr
	}
	if lc.cl, err = cf.client(); err != nil {
		return nil, err
	}
	lc.cf, lc.target = cf, pos[0]
	return lc, nil
}
