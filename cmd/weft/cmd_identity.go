package main

import (
	"fmt"

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
