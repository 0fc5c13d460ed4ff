package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/weft-sched/weft/internal/identity"
	"github.com/weft-sched/weft/rpc"
)

// runNodeResetSecret forgets a DOWN node's secret (SPEC §15): the way back
// for an agent whose data dir, and with it its node secret, was lost.
func runNodeResetSecret(args []string) error {
	cf, pos, err := clientCommand("node reset-secret", args, 1, "weft node reset-secret NODE", nil)
	if err != nil {
		return err
	}
	var resp rpc.WriteResponse
	if err := cf.call("Node.ResetSecret", &rpc.NodeResetSecretRequest{ID: pos[0]}, &resp); err != nil {
		return err
	}
	if cf.json {
		return printJSON(resp)
	}
	fmt.Fprintf(stdout, "Node %s has no secret now: the next agent to register as %s sets a new one\n", pos[0], pos[0])
	return nil
}

// runWorkloadKeyRotate installs a new workload token signing key.
func runWorkloadKeyRotate(args []string) error {
	cf, _, err := clientCommand("operator workload-key rotate", args, 0, "weft operator workload-key rotate", nil)
	if err != nil {
		return err
	}
	var resp rpc.WorkloadKeyRotateResponse
	h := cf.header()
	if err := cf.call("Operator.WorkloadKeyRotate", &h, &resp); err != nil {
		return err
	}
	if cf.json {
		return printJSON(resp)
	}
	fmt.Fprintf(stdout, "Workload tokens are now signed with key %d; %d keys are kept (retired keys verify their tokens for %s more)\n",
		resp.KeyID, resp.NumKeys, identity.MaxTokenLifetime)
	return nil
}

// runNodeJoinToken groups the node-join token commands.
func runNodeJoinToken(args []string) error {
	return subcommand("node join-token", args, map[string]func([]string) error{"create": runJoinTokenCreate})
}

// runJoinTokenCreate makes a node-join token: with ACLs on, what an agent
// needs to register a node the servers do not know yet.
func runJoinTokenCreate(args []string) error {
	req := rpc.JoinTokenCreateRequest{}
	cf, _, err := clientCommand("node join-token create", args, 0, "weft node join-token create [-node NODE] [-ttl 1h] [-json]", func(fs *flag.FlagSet) {
		fs.StringVar(&req.Node, "node", "", "the one `NODE` name the token may register (default: any)")
		fs.DurationVar(&req.TTL, "ttl", time.Hour, "how long the token is valid (`DURATION`, at most 24h)")
	})
	if err != nil {
		return err
	}
	var resp rpc.JoinTokenCreateResponse
	if err := cf.call("Node.JoinTokenCreate", &req, &resp); err != nil {
		return err
	}
	if cf.json {
		return printJSON(resp)
	}
	scope := "any new node"
	if resp.Node != "" {
		scope = "node " + resp.Node
	}
	// The token alone on stdout, so that it can be written where agents
	// read it (join_token_file); what it is good for on stderr.
	fmt.Fprintf(stderr, "Join token for %s, valid until %s: give it to the agent as join_token, in join_token_file or in WEFT_JOIN_TOKEN\n",
		scope, time.Unix(0, resp.ExpiresAt).UTC().Format(time.RFC3339))
	fmt.Fprintln(stdout, resp.Token)
	return nil
}
