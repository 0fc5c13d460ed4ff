package main

import (
	"flag"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/weft-sched/weft/rpc"
)

func table() *tabwriter.Writer { return tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0) }

func runMembers(args []string) error {
	cf, _, err := clientCommand("members", args, 0, "weft members [-address ADDR] [-json]", nil)
	if err != nil {
		return err
	}
	var resp rpc.MembersResponse
	h := cf.header()
	if err := cf.call("Status.Members", &h, &resp); err != nil {
		return err
	}
	if cf.json {
		return printJSON(orEmpty(resp.Members))
	}
	w := table()
	fmt.Fprintln(w, "NAME\tADDRESS\tROLE\tSTATUS\tTAGS")
	for _, m := range resp.Members {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", m.Name, m.Address, m.Role, m.Status, formatTags(m.Tags))
	}
	return w.Flush()
}

func formatTags(tags map[string]string) string {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		if k == "role" || k == "id" {
			continue // already shown as columns
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + tags[k]
	}
	return strings.Join(parts, ",")
}

func runStatus(args []string) error {
	cf, _, err := clientCommand("status", args, 0, "weft status [-address ADDR] [-json] [-stale]", nil)
	if err != nil {
		return err
	}
	var st rpc.ClusterStatus
	h := cf.header()
	if err := cf.call("Status.Cluster", &h, &st); err != nil {
		return err
	}
	if cf.json {
		st.Servers = orEmpty(st.Servers)
		return printJSON(st)
	}
	w := table()
	leader := st.Leader
	if leader == "" {
		leader = "(none)"
	}
	fmt.Fprintf(w, "Leader\t%s\n", leader)
	fmt.Fprintf(w, "Servers\t%d\n", len(st.Servers))
	r := st.Raft
	fmt.Fprintf(w, "Raft\tterm %d; %s (%s) has applied %d of %d committed\n", r.Term, r.ID, strings.ToLower(r.State), r.AppliedIndex, r.CommitIndex)
	fmt.Fprintf(w, "Nodes\t%d ready, %d draining, %d down\n", st.Nodes.Ready, st.Nodes.Draining, st.Nodes.Down)
	fmt.Fprintf(w, "Capacity\t%s\n", st.Capacity)
	fmt.Fprintf(w, "Used (G)\t%s, %d running\n", st.UsedGuaranteed, st.RunningGuaranteed)
	fmt.Fprintf(w, "Used (O)\t%s, %d running, %d queued\n", st.UsedOpportunistic, st.RunningOpportunistic, st.Queued)
	states := make([]string, 0, len(st.Apps))
	for s, n := range st.Apps {
		states = append(states, fmt.Sprintf("%s=%d", s, n))
	}
	sort.Strings(states)
	if len(states) == 0 {
		states = []string{"none"}
	}
	fmt.Fprintf(w, "Apps\t%s\n", strings.Join(states, " "))
	if len(st.Subclusters) > 0 { // a federation's router totalled them
		fmt.Fprintf(w, "Sub-clusters\t%s (leader and servers above are the routers')\n", strings.Join(st.Subclusters, ", "))
	}
	for _, u := range st.Unreachable {
		fmt.Fprintf(w, "Not counted\t%s\n", u)
	}
	if st.StaleNote() != "" {
		fmt.Fprintf(w, "Note\t%s\n", st.StaleNote())
	}
	return w.Flush()
}

func runOperator(args []string) error {
	return subcommand("operator", args, map[string]func([]string) error{
		"keygen": runKeygen,
		"gossip": func(args []string) error {
			return subcommand("operator gossip", args, map[string]func([]string) error{"keyring": runGossipKeyring})
		},
		"raft": func(args []string) error {
			return subcommand("operator raft", args, map[string]func([]string) error{
				"list-peers":  runRaftListPeers,
				"remove-peer": runRaftRemovePeer,
			})
		},
		"workload-key": func(args []string) error {
			return subcommand("operator workload-key", args, map[string]func([]string) error{"rotate": runWorkloadKeyRotate})
		},
	})
}

func runRaftListPeers(args []string) error {
	cf, _, err := clientCommand("operator raft list-peers", args, 0, "weft operator raft list-peers [-address ADDR] [-json] [-stale]", nil)
	if err != nil {
		return err
	}
	var resp rpc.RaftConfigurationResponse
	h := cf.header()
	if err := cf.call("Operator.RaftGetConfiguration", &h, &resp); err != nil {
		return err
	}
	if cf.json {
		return printJSON(orEmpty(resp.Servers))
	}
	w := table()
	fmt.Fprintln(w, "ID\tADDRESS\tSTATE\tVOTER")
	for _, s := range resp.Servers {
		fmt.Fprintf(w, "%s\t%s\t%s\t%v\n", s.ID, s.Address, s.State, s.Voter)
	}
	return w.Flush()
}

func runRaftRemovePeer(args []string) error {
	var req rpc.RaftRemovePeerRequest
	const usage = "weft operator raft remove-peer (-id ID | -peer-address HOST:PORT)"
	cf, _, err := clientCommand("operator raft remove-peer", args, 0, usage, func(fs *flag.FlagSet) {
		fs.StringVar(&req.ID, "id", "", "`ID` of the peer to remove")
		fs.StringVar(&req.Address, "peer-address", "", "RPC `HOST:PORT` of the peer to remove")
	})
	if err != nil {
		return err
	}
	if (req.ID == "") == (req.Address == "") {
		return usagef("usage: %s", usage)
	}
	var resp rpc.WriteResponse
	if err := cf.call("Operator.RaftRemovePeer", &req, &resp); err != nil {
		return err
	}
	if cf.json {
		return printJSON(resp)
	}
	fmt.Fprintf(stdout, "Removed peer %s%s from the Raft configuration\n", req.ID, req.Address)
	return nil
}

// filterNote says which list filters were given, from name/value pairs:
// " with state=RUNNING, user=alice", or "" when none was.
func filterNote(pairs ...string) string {
	var set []string
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			set = append(set, pairs[i]+"="+pairs[i+1])
		}
	}
	if len(set) == 0 {
		return ""
	}
	return " with " + strings.Join(set, ", ")
}
