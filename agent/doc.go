// Package agent will be a weft node: it joins the serf pool, registers its
// capacity and rack with the servers and heartbeats to them, runs containers
// as processes (launch, queue, kill, logs), and hosts the AMRMProxy with the
// distributed opportunistic scheduler and the built-in application masters.
//
// It is plumbing around scheduler decisions: node selection and queueing
// rules live in package scheduler. The agent must never write replicated
// state except through server RPCs, and a container must never outlive the
// agent's knowledge of it. (The package is empty until agents are built.)
package agent
