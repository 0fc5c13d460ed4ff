package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/weft-sched/weft/am"
	"github.com/weft-sched/weft/internal/tlsutil"
	"github.com/weft-sched/weft/rpc"
)

// runAMMapReduce runs the MapReduce AM inside its AM container.
func runAMMapReduce(args []string) error {
	pos, err := parseArgs(newFlagSet("am mapreduce"), args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("weft am mapreduce takes no arguments (an agent starts it inside an AM container)")
	}
	client, err := rpc.NewAMClientFromEnv()
	if err != nil {
		return err
	}
	defer client.Close()
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the weft binary the tasks run: %w", err)
	}
	logger, _ := newLogger("info", false)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := am.NewMapReduce(client, logger, exe).Run(ctx); err != nil {
		return fmt.Errorf("mapreduce AM: %w", err)
	}
	fmt.Fprintln(os.Stderr, "mapreduce AM done")
	return nil
}

// runMapTask runs one map of a MapReduce job in its container.
func runMapTask(args []string) error {
	t := am.MapTask{Stderr: os.Stderr, Dir: "."}
	fs := newFlagSet("am map-task")
	fs.StringVar(&t.Split, "split", "", "the split `FILE` the map reads")
	fs.IntVar(&t.Reducers, "reducers", 0, "how many partitions the output is hashed into")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case t.Split == "":
		return usagef("-split: give the split file")
	case t.Reducers < 1:
		return usagef("-reducers: must be at least 1, not %d", t.Reducers)
	case len(pos) == 0:
		return usagef("give the map command after --")
	}
	t.Command = pos
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	return t.Run(ctx)
}

// runReduceTask runs one reduce of a MapReduce job in its container. A
// reduce that could not fetch some map's output exits am.ExitFetchFailed.
func runReduceTask(args []string) error {
	t := am.ReduceTask{Stderr: os.Stderr, Dir: "."}
	var feeds []string
	fs := newFlagSet("am reduce-task")
	fs.IntVar(&t.Partition, "partition", -1, "the partition this reduce reduces")
	fs.StringVar(&t.Output, "output", "", "the job's output `DIR`")
	fs.Var((*repeated)(&feeds), "feed", "a map output to fetch: `MAP,CONTAINER,ADDRESS` (repeat)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case t.Partition < 0:
		return usagef("-partition: give the partition")
	case t.Output == "":
		return usagef("-output: give the output directory")
	case len(pos) == 0:
		return usagef("give the reduce command after --")
	}
	for _, f := range feeds {
		feed, err := am.ParseFeed(f)
		if err != nil {
			return usagef("-feed: %v", err)
		}
		t.Feeds = append(t.Feeds, feed)
	}
	t.Command = pos
	var tc *tlsutil.Configurator
	if ca := os.Getenv(rpc.EnvCACert); ca != "" {
		if tc, err = tlsutil.New(ca, "", "", os.Getenv(rpc.EnvRegion)); err != nil {
			return fmt.Errorf("%s: %w", rpc.EnvCACert, err)
		}
	}
	// The client reaches agents only: the reduce fetches with the AM token
	// its AM gave it (a file of its secrets), and talks to no AMRMProxy.
	token, err := rpc.AMTokenFromEnv()
	if err != nil {
		return err
	}
	client := rpc.NewAMClientTLS(os.Getenv(rpc.EnvAppID), 0, token, "", tc)
	if tc != nil {
		client.Via = os.Getenv(rpc.EnvAgentAddr) // its node's agent relays its fetches
	}
	defer client.Close()
	t.Fetch = client
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err = t.Run(ctx)
	if errors.Is(err, am.ErrFetchFailed) {
		fmt.Fprintf(os.Stderr, "weft reduce: %v\n", err)
		os.Exit(am.ExitFetchFailed)
	}
	return err
}
