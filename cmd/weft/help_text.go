package main

// helps holds the help of every command and group, keyed by its path
// after "weft" ("" is weft itself). A command without an entry fails
// TestHelpEveryCommand.
var helps = map[string]helpEntry{
	"": {
		usage: []string{"weft COMMAND [SUBCOMMAND] [flags] [args]"},
		desc: "weft is a cluster scheduler: servers keep the cluster's state in Raft, agents run containers, " +
			"and this one binary is the server, the agent, the built-in application master and the client.",
		examples: []string{
			"# a one-process cluster to try things out, then an app on it",
			"weft dev",
			"weft app submit -num-containers 4 -wait -- sh -c 'echo hello from $WEFT_CONTAINER_ID'",
			"weft app logs APP_ID",
		},
	},
	"help": {
		usage:    []string{"weft help [COMMAND [SUBCOMMAND]]"},
		summary:  "show the help of a command (the same as COMMAND -h)",
		desc:     "Prints the help of a command or group on stdout: its usage, what it does, its flags and examples.",
		examples: []string{"weft help app submit", "weft help acl token"},
	},
	"version": {
		usage:    []string{"weft version [-json]", "weft -version"},
		summary:  "print the version and the build",
		desc:     "Prints weft's version (stamped by the Makefile), the Go version it was built with, its VCS revision and time (and whether the tree had uncommitted changes) and the OS and architecture.",
		examples: []string{"weft version", "weft version -json"},
	},
	"server": {
		usage:   []string{"weft server -node-id ID -data-dir DIR -bind IP [-bootstrap-expect N] [-join ADDR]... [-config FILE]"},
		summary: "run a weft server",
		desc: "Runs a server: a Raft voter that keeps the cluster's state, schedules guaranteed containers when it leads, " +
			"and answers clients. Settings come from flags or an HCL -config file (flags win). Off loopback a server " +
			"needs TLS, a gossip key and ACLs, or -insecure.",
		examples: []string{
			"weft server -node-id s1 -data-dir /var/lib/weft -bind 10.0.0.1 -bootstrap-expect 3 -join 10.0.0.2:8031 -join 10.0.0.3:8031 -insecure",
			"weft server -config /etc/weft/server.hcl",
		},
	},
	"router": {
		usage:   []string{"weft router -node-id ID -data-dir DIR -bind IP [-bootstrap-expect N] [-join ADDR]... [-config FILE]"},
		summary: "run a federation router",
		desc: "Runs a router (SPEC §18): a Raft voter among the routers that keeps the federation's state — the sub-clusters " +
			"their leaders report, the home of every app submitted through a router, the queues' policies — marks a " +
			"sub-cluster LOST after subcluster_timeout without a heartbeat, and, when it leads, recomputes every queue's " +
			"weights every gpg_interval. It answers every client command and the HTTP API (-http-port) as a server " +
			"does, for the whole federation. Settings come from flags or an HCL -config file (flags win). Off loopback " +
			"a router needs TLS (a router certificate), a gossip key and ACLs (acl { enabled = true }: tokens are " +
			"checked against the sub-clusters'), or -insecure. docs/federation.md.",
		examples: []string{
			"weft router -node-id r1 -data-dir /var/lib/weft-router -bind 10.0.1.1 -bootstrap-expect 3 -join 10.0.1.2:8061 -join 10.0.1.3:8061",
			"weft router -config /etc/weft/router.hcl",
		},
	},
	"federation": {
		usage:    []string{"weft federation SUBCOMMAND [flags] [args]"},
		summary:  "the sub-clusters and policies of a federation (ask a router)",
		desc:     "Asks the routers (-address ROUTER, port 8060 by default) about the federation's sub-clusters and sets the queues' routing policies.",
		examples: []string{"weft federation subclusters -address 10.0.1.1:8060", "weft federation policy apply fed.hcl"},
	},
	"federation subclusters": {
		usage:    []string{"weft federation subclusters [-json] [-stale]"},
		summary:  "list the sub-clusters with their state, capacity, use and last heartbeat",
		desc:     "Lists every sub-cluster the routers know: its state (NEW, RUNNING, UNHEALTHY, LOST, DECOMMISSIONED) and why, the capacity of its ready nodes, the guaranteed resources used and pending, its nodes and running apps, how many apps the routers made their home there, when its leader last reported, and its servers.",
		examples: []string{"weft federation subclusters -address 127.0.0.1:8060", "weft federation subclusters -json"},
	},
	"federation subcluster": {
		usage:    []string{"weft federation subcluster SUBCOMMAND ID"},
		summary:  "decommission, recommission or forget a sub-cluster",
		desc:     "An operator's actions on a sub-cluster: a DECOMMISSIONED one gets no new apps whatever it reports; recommissioning makes it NEW until its next healthy report; forget drops a decommissioned one from the routers' state.",
		examples: []string{"weft federation subcluster decommission sc2", "weft federation subcluster recommission sc2"},
	},
	"federation subcluster decommission": {
		usage:    []string{"weft federation subcluster decommission ID"},
		summary:  "retire a sub-cluster: no new apps go to it",
		desc:     "Marks the sub-cluster DECOMMISSIONED: routing skips it whatever its leader reports, until it is recommissioned. Its apps keep running.",
		examples: []string{"weft federation subcluster decommission sc2 -address 10.0.1.1:8060"},
	},
	"federation subcluster recommission": {
		usage:    []string{"weft federation subcluster recommission ID"},
		summary:  "take a decommissioned sub-cluster back",
		desc:     "Makes a DECOMMISSIONED sub-cluster NEW: its next healthy report makes it RUNNING.",
		examples: []string{"weft federation subcluster recommission sc2"},
	},
	"federation subcluster forget": {
		usage:    []string{"weft federation subcluster forget ID"},
		summary:  "drop a decommissioned sub-cluster from the routers' state",
		desc:     "Removes a DECOMMISSIONED sub-cluster; any other state is refused (decommission it first).",
		examples: []string{"weft federation subcluster forget sc2"},
	},
	"federation policy": {
		usage:    []string{"weft federation policy SUBCOMMAND [flags] [args]"},
		summary:  "apply and list the queues' federation policies",
		desc:     "Each queue's router policy (uniform, hash, priority, weighted, load, locality, reject) decides the home sub-cluster of its new apps; a queue without a policy takes its nearest ancestor's, then the default's, then load.",
		examples: []string{"weft federation policy apply fed.hcl", "weft federation policy list"},
	},
	"federation policy apply": {
		usage:   []string{"weft federation policy apply [-replace] FILE"},
		summary: "set queues' federation policies from a file",
		desc: "Sets the policies of the queues FILE names (HCL or JSON: a default block and queue \"PATH\" blocks with router, " +
			"optionally amrmproxy and weights = { SUBCLUSTER = N, ... }); -replace drops the policies the file leaves out. " +
			"A queue given no weights takes the generator's. Nothing changes when the file is invalid.",
		examples: []string{"weft federation policy apply fed.hcl", "weft federation policy apply -replace fed.hcl"},
	},
	"federation policy list": {
		usage:    []string{"weft federation policy list [-json] [-stale]"},
		summary:  "show the policies and the generated weights",
		desc:     "Shows each policy (the default first) with its weights: the operator's, or the global policy generator's.",
		examples: []string{"weft federation policy list", "weft federation policy list -json"},
	},
	"agent": {
		usage:   []string{"weft agent -node-id ID -data-dir DIR -bind IP -join ADDR [-resources memory_mb=M,vcores=V,...] [-rack R] [-config FILE]"},
		summary: "run a weft agent (a node that runs containers)",
		desc: "Runs an agent: a node that offers its resources to the cluster, runs containers as processes, " +
			"and keeps their logs for log_retention after they complete. Settings come from flags or an HCL -config " +
			"file (flags win); examples/agent.hcl shows every setting.",
		examples: []string{
			"weft agent -node-id a1 -data-dir /var/lib/weft-agent -bind 10.0.0.11 -join 10.0.0.1:8031 -resources memory_mb=16384,vcores=8 -insecure",
			"weft agent -config examples/agent.hcl",
		},
	},
	"dev": {
		usage:    []string{"weft dev [-agents N] [-resources memory_mb=M,vcores=V] [-bind IP]"},
		summary:  "run a one-process development cluster on 127.0.0.1",
		desc:     "Runs one server and N agents in this process, with their data in a temporary directory removed on exit. It is open (no TLS, gossip key or ACLs), so it listens on loopback only.",
		examples: []string{"weft dev", "weft dev -agents 1 -resources memory_mb=2048,vcores=2 -log-json"},
	},
	"sim": {
		usage: []string{
			"weft sim (-servers ADDR,... | -start-servers N) [-nodes N] [-node-resources memory_mb=M,vcores=V] [-racks R] [-heartbeat D] [-duration D] [-trace FILE | synthetic flags] [-amrmproxy=false] [-nodes-used N] [-out DIR] [-cpuprofile FILE]",
			"weft sim -start-servers N [-server-config FILE] [-restart-at D [-restart-signal kill|term]] [flags]",
		},
		summary: "load-test a server quorum with simulated nodes and AMs",
		desc: "Runs the load simulator (SPEC §17): thousands of simulated nodes register and heartbeat over the real node " +
			"protocol (one connection each, like agents) and simulated AMs speak the real AM protocol, against a running " +
			"quorum (-servers) or one it starts itself (-start-servers, open, on loopback). Each node has an AMRMProxy that " +
			"allocates its AMs' opportunistic asks from the leader's least-loaded list, as agents do (-amrmproxy=false: the " +
			"AMs ask the leader). Tasks run for their trace or " +
			"synthetic duration with no processes. Prints a summary (apps and tasks finished, allocations/s, ask-to-allocation " +
			"and heartbeat latency, opportunistic ask-to-allocation at the proxies, utilisation, spurious DOWN nodes, leadership changes) and, with -out, writes summary.txt, " +
			"summary.json, series.csv and SVG charts. A progress line goes to stderr every few seconds. With -restart-at, the " +
			"servers it started are all stopped at once (SIGKILL unless -restart-signal term) and started again on the same " +
			"ports and data while the nodes keep heartbeating; the summary adds the state before and after, the time to a " +
			"leader, to a ready leader and to every node heartbeating again, spurious DOWN nodes and re-registrations, and " +
			"each server's snapshot restore time from its log.",
		examples: []string{
			"weft sim -start-servers 3 -nodes 1000 -duration 2m -apps-per-second 2 -out /tmp/sim",
			"# crash and restart the whole quorum 40 s in, with finished apps kept in the state",
			"weft sim -start-servers 3 -nodes 1000 -duration 90s -restart-at 40s -server-config keep.hcl -out /tmp/sim",
			"weft sim -servers 10.0.0.1:8030,10.0.0.2:8030 -nodes 500 -trace sls-trace.json -out /tmp/sim",
			"weft sim -start-servers 3 -nodes 2000 -node-resources memory_mb=8192,vcores=4 -opportunistic 1 -nodes-used 100 -out /tmp/sim",
		},
	},
	"members": {
		usage:    []string{"weft members [-json] [-stale]"},
		summary:  "list the members of the gossip pool",
		desc:     "Lists every server and agent the servers' gossip pool knows, with its address, role, status and tags.",
		examples: []string{"weft members", "weft members -json -address 10.0.0.1:8030"},
	},
	"status": {
		usage:    []string{"weft status [-json] [-stale]"},
		summary:  "summarise the cluster",
		desc:     "Shows the leader, the servers, the Raft indexes, the nodes ready and down, capacity and what guaranteed and opportunistic containers use, and the apps by state.",
		examples: []string{"weft status", "weft status -json"},
	},

	"am": {
		usage:    []string{"weft am TYPE"},
		summary:  "run a built-in application master (used by agents)",
		desc:     "The built-in application masters. Agents start them inside AM containers; there is no need to run one by hand.",
		examples: []string{"# what an agent runs in an app's AM container", "weft am dshell", "weft am mapreduce"},
	},
	"am mapreduce": {
		usage:   []string{"weft am mapreduce"},
		summary: "the MapReduce AM: runs a job's maps near their splits and its reduces at their centers of gravity",
		desc: "Runs the MapReduce application master of the app its container belongs to (SPEC §19): a map task per split, asked for on the split's nodes and racks; " +
			"once every map is done, a reduce task per partition, asked for with the bytes each node holds for it (or anywhere, with reduce_placement = \"any\"). " +
			"A reduce that cannot fetch a map's output has the map run again. The job's counters go to the servers; weft app status shows them.",
		examples: []string{"# started by an agent for an app submitted with -type mapreduce", "weft am mapreduce"},
	},
	"am map-task": {
		usage:   []string{"weft am map-task -split FILE -reducers R -- COMMAND [ARG...]"},
		summary: "one map of a MapReduce job (run by the MapReduce AM in a container)",
		desc: "Runs COMMAND with the split on stdin and hashes each `key<TAB>value` line of its stdout into one of R partitions, " +
			"each sorted by key, in mapout/ of the container's work directory, with mapout/index.json written last.",
		examples: []string{"# what the MapReduce AM starts in a map container", "weft am map-task -split /data/in/part-0 -reducers 4 -- awk '{for (i = 1; i <= NF; i++) print $i \"\\t1\"}'"},
	},
	"am reduce-task": {
		usage:   []string{"weft am reduce-task -partition R -output DIR -feed MAP,CONTAINER,ADDRESS... -- COMMAND [ARG...]"},
		summary: "one reduce of a MapReduce job (run by the MapReduce AM in a container)",
		desc: "Fetches partition R of each map's output from the map's agent (Container.Output, with the AM token its AM handed it as a file in WEFT_SECRETS_DIR), " +
			"merges them by key into COMMAND's stdin and writes its stdout to DIR/part-r-NNNNN. " +
			"When a map's output cannot be fetched, it names the map in fetch-failures.json and exits 75.",
		examples: []string{"# what the MapReduce AM starts in a reduce container", "weft am reduce-task -partition 0 -output /data/out -feed 0,c-12-3,10.0.0.11:8049 -- sort"},
	},
	"am dshell": {
		usage:    []string{"weft am dshell"},
		summary:  "the distributed-shell AM: runs an app's command in its containers",
		desc:     "Runs the dshell application master of the app its container belongs to: it asks for the app's containers, launches the command in each, and finishes the app when they have run. It reads its settings from the environment an agent gives AM containers.",
		examples: []string{"# started by an agent, never by hand", "weft am dshell"},
	},

	"app": {
		usage:    []string{"weft app SUBCOMMAND [flags] [args]"},
		summary:  "submit, list, inspect, wait for and kill apps; read their logs",
		desc:     "Applications: submit one, follow it to its end, read every container's logs, list and kill them.",
		examples: []string{"weft app submit -num-containers 2 -wait -- echo hi", "weft app list -state RUNNING", "weft app logs -f app-7"},
	},
	"app submit": {
		usage:   []string{"weft app submit [flags] -- CMD ARGS...", "weft app submit -spec FILE [flags]", "weft app submit -type mapreduce -spec JOB.hcl [flags]"},
		summary: "submit an app that runs a command in containers, or a MapReduce job",
		desc: "Submits an app whose built-in AM runs CMD in -num-containers containers, or the app a -spec file " +
			"(HCL or JSON) describes; flags given with -spec override the file. -nodes and -racks ask for the " +
			"containers on those nodes or racks; delay scheduling relaxes that unless -relax-locality=false. " +
			"-type mapreduce submits the MapReduce job of a -spec file's mapreduce block (splits, map, reduce, reducers, output; docs/mapreduce.md). " +
			"Prints the app's ID; with -wait, follows it to its end and exits 1 unless it FINISHED.",
		examples: []string{
			"weft app submit -num-containers 4 -memory-mb 256 -wait -- sh -c 'echo hello from $WEFT_CONTAINER_ID'",
			"weft app submit -queue analytics -container-type OPPORTUNISTIC -- ./crunch.sh",
			"weft app submit -num-containers 2 -nodes node-1,node-2 -relax-locality=false -- hostname",
			"weft app submit -spec examples/app.hcl -priority 5",
			"weft app submit -type mapreduce -spec examples/wordcount/job.hcl -wait",
		},
	},
	"app list": {
		usage:    []string{"weft app list [-queue Q] [-state S] [-user U] [-json] [-stale]"},
		summary:  "list apps",
		desc:     "Lists apps, in numeric ID order, with their queue, user, state, containers and AM attempts; the flags filter them.",
		examples: []string{"weft app list", "weft app list -state RUNNING -queue root.analytics -json"},
	},
	"app status": {
		usage:    []string{"weft app status [-json] [-stale] APP"},
		summary:  "show an app",
		desc:     "Shows an app: its state and diagnostics, containers, why it waits if it does, its AM attempts, the containers preempted from it and the nodes its AM blacklisted.",
		examples: []string{"weft app status app-7", "weft app status -json app-7"},
	},
	"app kill": {
		usage:    []string{"weft app kill APP"},
		summary:  "kill an app and its containers",
		desc:     "Kills an app: it ends KILLED and its containers are stopped.",
		examples: []string{"weft app kill app-7"},
	},
	"app wait": {
		usage:    []string{"weft app wait [-json] APP"},
		summary:  "wait for an app to end",
		desc:     "Follows an app until it ends, printing its progress on stderr; exits 0 if it FINISHED and 1 otherwise.",
		examples: []string{"weft app wait app-7 && echo done"},
	},
	"app logs": {
		usage:   []string{"weft app logs [-stderr] [-f] APP"},
		summary: "show every container's logs of an app, labelled",
		desc: "Prints the stdout (or -stderr) of every container of an app, each line labelled with its container's ID, " +
			"as 'docker compose logs' does. With -f it keeps following: new containers and new output, until the app " +
			"has ended and every log is read (or Ctrl-C).",
		examples: []string{"weft app logs app-7", "weft app logs -f -stderr app-7"},
	},

	"container": {
		usage:    []string{"weft container SUBCOMMAND [flags] [args]"},
		summary:  "list containers and read their logs",
		desc:     "Containers of every app on every node.",
		examples: []string{"weft container list -app app-7", "weft container logs -f container-12"},
	},
	"container list": {
		usage:    []string{"weft container list [-app APP] [-node NODE] [-state S] [-json] [-stale]"},
		summary:  "list containers",
		desc:     "Lists containers, in numeric ID order, with their app, node, execution type, state, exit code and resources; the flags filter them.",
		examples: []string{"weft container list", "weft container list -app app-7 -state RUNNING"},
	},
	"container logs": {
		usage:    []string{"weft container logs [-stderr] [-f] CONTAINER"},
		summary:  "print a container's stdout or stderr",
		desc:     "Prints a container's stdout (or -stderr), read from the agent that runs or ran it; with -f it keeps printing until the container ends.",
		examples: []string{"weft container logs container-12", "weft container logs -f -stderr container-12"},
	},

	"node": {
		usage:    []string{"weft node SUBCOMMAND [flags] [args]"},
		summary:  "list, inspect and drain agent nodes",
		desc:     "The agents' nodes: their capacity and load, draining one before maintenance, and resetting a lost node's secret.",
		examples: []string{"weft node list", "weft node drain -deadline 30m agent-3"},
	},
	"node list": {
		usage:    []string{"weft node list [-state S] [-json] [-stale]"},
		summary:  "list nodes",
		desc:     "Lists nodes with their address, rack, status, capacity, what guaranteed and opportunistic containers hold, and their opportunistic queue.",
		examples: []string{"weft node list", "weft node list -json"},
	},
	"node status": {
		usage:    []string{"weft node status [-json] [-stale] NODE"},
		summary:  "show a node and its containers",
		desc:     "Shows a node: its status, epoch, capacity, allocations, estimated queue wait and the containers it runs.",
		examples: []string{"weft node status agent-1"},
	},
	"node drain": {
		usage:    []string{"weft node drain [-deadline 1h] [-disable] NODE"},
		summary:  "stop placing containers on a node and empty it",
		desc:     "Marks a node DRAINING: it takes no new containers; those running finish, or are killed with reason drained at the deadline and their AMs ask again elsewhere. -disable makes the node READY again.",
		examples: []string{"weft node drain -deadline 30m agent-3", "weft node drain -disable agent-3"},
	},
	"node join-token": {
		usage:    []string{"weft node join-token create [-node NODE] [-ttl 1h] [-json]"},
		summary:  "make tokens that let new agents register",
		desc:     "With ACLs on, the servers register a node they do not know (or whose secret was reset) only with a node-join token. Needs node write.",
		examples: []string{"weft node join-token create -ttl 2h", "weft node join-token create -node agent-7"},
	},
	"node join-token create": {
		usage:    []string{"weft node join-token create [-node NODE] [-ttl 1h] [-json]"},
		summary:  "make a node-join token",
		desc:     "Prints a token that lets agents register new nodes until it expires (at most 24h): any name, or only NODE. Give it to the agent as join_token in its config file or in WEFT_JOIN_TOKEN. The servers keep nothing of it: it is a signature, which a workload key rotation does not end before it expires.",
		examples: []string{"weft node join-token create -ttl 2h", "WEFT_JOIN_TOKEN=$(weft node join-token create -json | jq -r .token) weft agent -config agent.hcl"},
	},
	"node reset-secret": {
		usage:    []string{"weft node reset-secret NODE"},
		summary:  "forget a DOWN node's secret",
		desc:     "Forgets the secret of a DOWN node, so that an agent that lost its data dir can register as that node again.",
		examples: []string{"weft node reset-secret agent-3"},
	},

	"queue": {
		usage:    []string{"weft queue SUBCOMMAND [flags] [args]"},
		summary:  "apply, list and inspect queues",
		desc:     "The queue tree and its fair shares.",
		examples: []string{"weft queue apply -dry-run examples/queues.hcl", "weft queue list"},
	},
	"queue apply": {
		usage:    []string{"weft queue apply [-dry-run] FILE"},
		summary:  "replace the queue configuration with a file's",
		desc:     "Replaces the scheduler and queue configuration with FILE (HCL or JSON; - reads stdin). Nothing changes when the file is invalid. -dry-run shows each queue's fair shares now and after, and which running apps would become preemptable, and changes nothing.",
		examples: []string{"weft queue apply examples/queues.hcl", "weft queue apply -dry-run examples/queues.hcl", "cat queues.json | weft queue apply -"},
	},
	"queue import": {
		usage:    []string{"weft queue import [-o FILE] [-json] capacity-scheduler.xml"},
		summary:  "turn a YARN capacity-scheduler.xml into a queue file",
		desc:     "Reads a YARN capacity-scheduler.xml (and yarn.scheduler.minimum-allocation-mb/-vcores if it holds them) and writes the equivalent queue file (HCL) to stdout or FILE: the queue tree with capacity, maximum-capacity, user-limit-factor, minimum-user-limit-percent and maximum-am-resource-percent, and node-locality-delay. Every property it could not carry over is named on stderr, with why. The file is checked as 'weft queue apply' would check it; nothing is sent to a server.",
		examples: []string{"weft queue import capacity-scheduler.xml > queues.hcl", "weft queue import -o queues.hcl capacity-scheduler.xml && weft queue apply -dry-run queues.hcl"},
	},
	"queue list": {
		usage:    []string{"weft queue list [-json] [-stale]"},
		summary:  "show the queue tree with fair shares and usage",
		desc:     "Shows the queue tree: each queue's policy, weight, min and max, steady and instantaneous fair share, usage, pending resources and running apps.",
		examples: []string{"weft queue list", "weft queue list -json"},
	},
	"queue status": {
		usage:    []string{"weft queue status [-json] [-stale] QUEUE"},
		summary:  "show one queue",
		desc:     "Shows one queue's settings, fair shares, usage and preemption settings.",
		examples: []string{"weft queue status root.analytics"},
	},

	"operator": {
		usage:    []string{"weft operator SUBCOMMAND [flags] [args]"},
		summary:  "operator actions: raft peers, gossip keys, workload keys",
		desc:     "Operating the servers: the Raft configuration, gossip encryption keys and the workload token signing key.",
		examples: []string{"weft operator raft list-peers", "weft operator keygen"},
	},
	"operator keygen": {
		usage:    []string{"weft operator keygen [-data-dir DIR]..."},
		summary:  "make a new gossip encryption key",
		desc:     "Prints a new random gossip encryption key (base64 of 32 bytes) for the encrypt setting of servers and agents; with -data-dir, writes it as the keyring of each data dir instead, before the servers and agents first start there (docker-compose.yml does this).",
		examples: []string{"weft operator keygen > gossip.key", "weft operator keygen -data-dir /data/s1 -data-dir /data/a1"},
	},
	"operator raft": {
		usage:    []string{"weft operator raft SUBCOMMAND [flags]"},
		summary:  "list or remove Raft peers",
		desc:     "The servers' Raft configuration.",
		examples: []string{"weft operator raft list-peers"},
	},
	"operator raft list-peers": {
		usage:    []string{"weft operator raft list-peers [-json] [-stale]"},
		summary:  "list the Raft peers",
		desc:     "Lists the servers in the Raft configuration with their address, state (leader or follower) and whether they vote.",
		examples: []string{"weft operator raft list-peers"},
	},
	"operator raft remove-peer": {
		usage:    []string{"weft operator raft remove-peer (-id ID | -peer-address HOST:PORT)"},
		summary:  "remove a dead server from the Raft configuration",
		desc:     "Removes a server that is gone for good from the Raft configuration, so the quorum is counted without it.",
		examples: []string{"weft operator raft remove-peer -id s3"},
	},
	"operator gossip": {
		usage:    []string{"weft operator gossip keyring (-list | -install KEY | -use KEY | -remove KEY)"},
		summary:  "manage the gossip encryption keyring",
		desc:     "The gossip encryption keys every member holds; rotate a key with -install, -use, then -remove of the old one.",
		examples: []string{"weft operator gossip keyring -list"},
	},
	"operator gossip keyring": {
		usage:   []string{"weft operator gossip keyring (-list | -install KEY | -use KEY | -remove KEY) [-json]"},
		summary: "list, install, use or remove gossip keys on every member",
		desc:    "Lists the gossip keys the members hold, or installs, makes primary or removes one on every member. Exits 1 when a member failed or did not answer.",
		examples: []string{
			"weft operator gossip keyring -list",
			"weft operator gossip keyring -install $(weft operator keygen)",
		},
	},
	"operator workload-key": {
		usage:    []string{"weft operator workload-key rotate"},
		summary:  "rotate the workload token signing key",
		desc:     "The key that signs the tokens AM containers carry.",
		examples: []string{"weft operator workload-key rotate"},
	},
	"operator workload-key rotate": {
		usage:    []string{"weft operator workload-key rotate [-json]"},
		summary:  "sign workload tokens with a new key",
		desc:     "Makes a new workload token signing key; tokens signed by retired keys stay valid until they expire.",
		examples: []string{"weft operator workload-key rotate"},
	},

	"acl": {
		usage:    []string{"weft acl SUBCOMMAND [flags] [args]"},
		summary:  "bootstrap ACLs; manage tokens and policies",
		desc:     "Access control: the first management token, tokens and the policies they grant.",
		examples: []string{"weft acl bootstrap", "weft acl token create -name alice -policy submit"},
	},
	"acl bootstrap": {
		usage:    []string{"weft acl bootstrap [-json]"},
		summary:  "create the first management token",
		desc:     "Creates the cluster's first management token, once; its secret is shown only now.",
		examples: []string{"weft acl bootstrap -address 10.0.0.1:8030 -ca-cert ca.pem -client-cert client.pem -client-key client-key.pem"},
	},
	"acl token": {
		usage:    []string{"weft acl token SUBCOMMAND [flags] [args]"},
		summary:  "create, list, inspect and delete tokens",
		desc:     "ACL tokens: who a request comes from and what it may do.",
		examples: []string{"weft acl token list", "weft acl token create -name ci -policy submit -ttl 24h"},
	},
	"acl token create": {
		usage:    []string{"weft acl token create -name NAME [-policy P]... [-type client|management] [-ttl DURATION]"},
		summary:  "create a token",
		desc:     "Creates a token for NAME granting the named policies (client) or everything (management); with ACLs on, apps submitted with it run as NAME. The secret is shown only now.",
		examples: []string{"weft acl token create -name alice -policy submit", "weft acl token create -name ops -type management -ttl 8h"},
	},
	"acl token list": {
		usage:    []string{"weft acl token list [-json] [-stale]"},
		summary:  "list tokens (without their secrets)",
		desc:     "Lists tokens by accessor ID with their name, type, policies and expiry.",
		examples: []string{"weft acl token list"},
	},
	"acl token info": {
		usage:    []string{"weft acl token info [-json] ACCESSOR_ID"},
		summary:  "show a token",
		desc:     "Shows a token by its accessor ID (never its secret).",
		examples: []string{"weft acl token info 6f0e2a1c-..."},
	},
	"acl token self": {
		usage:    []string{"weft acl token self [-json]"},
		summary:  "show the token in use",
		desc:     "Shows the token given with -token or WEFT_TOKEN.",
		examples: []string{"WEFT_TOKEN=$(cat token) weft acl token self"},
	},
	"acl token delete": {
		usage:    []string{"weft acl token delete ACCESSOR_ID"},
		summary:  "delete a token",
		desc:     "Deletes a token by its accessor ID; requests carrying it are refused from then on.",
		examples: []string{"weft acl token delete 6f0e2a1c-..."},
	},
	"acl policy": {
		usage:    []string{"weft acl policy SUBCOMMAND [flags] [args]"},
		summary:  "apply, list, inspect and delete policies",
		desc:     "ACL policies: HCL rules naming what a token may do.",
		examples: []string{"weft acl policy apply submit submit.hcl", "weft acl policy list"},
	},
	"acl policy apply": {
		usage:    []string{"weft acl policy apply [-description TEXT] NAME FILE"},
		summary:  "create or replace a policy from an HCL file",
		desc:     "Creates or replaces the policy NAME with the rules in FILE (HCL; - reads stdin). Nothing changes when the rules are invalid.",
		examples: []string{"weft acl policy apply -description 'submit to analytics' submit submit.hcl"},
	},
	"acl policy list": {
		usage:    []string{"weft acl policy list [-json] [-stale]"},
		summary:  "list policies",
		desc:     "Lists policies with their description.",
		examples: []string{"weft acl policy list"},
	},
	"acl policy info": {
		usage:    []string{"weft acl policy info [-json] NAME"},
		summary:  "show a policy and its rules",
		desc:     "Shows a policy with its rules.",
		examples: []string{"weft acl policy info submit"},
	},
	"acl policy delete": {
		usage:    []string{"weft acl policy delete NAME"},
		summary:  "delete a policy",
		desc:     "Deletes a policy; tokens that named it no longer grant its rules.",
		examples: []string{"weft acl policy delete submit"},
	},

	"tls": {
		usage:    []string{"weft tls SUBCOMMAND [flags]"},
		summary:  "make a CA and certificates for mutual TLS",
		desc:     "A certificate authority and the certificates servers, agents and clients present to each other.",
		examples: []string{"weft tls ca create", "weft tls cert create -server -additional-ipaddress 10.0.0.1"},
	},
	"tls ca": {
		usage:    []string{"weft tls ca create [-days N] [-region R] [-dir D]"},
		summary:  "make a certificate authority",
		desc:     "The CA that signs every certificate of a region.",
		examples: []string{"weft tls ca create -dir /etc/weft/tls"},
	},
	"tls ca create": {
		usage:    []string{"weft tls ca create [-days N] [-region R] [-dir D]"},
		summary:  "write a new CA certificate and key",
		desc:     "Writes a new CA certificate and its key into -dir. Keep the key offline: it signs certificates, and no weft process needs it.",
		examples: []string{"weft tls ca create -dir /etc/weft/tls"},
	},
	"tls cert": {
		usage:    []string{"weft tls cert create -server|-agent|-router|-client [flags]"},
		summary:  "make certificates signed by the CA",
		desc:     "Certificates for servers, agents, routers and clients, signed by the CA.",
		examples: []string{"weft tls cert create -client"},
	},
	"tls cert create": {
		usage:   []string{"weft tls cert create -server|-agent|-router|-client [-region R] [-ca FILE] [-key FILE] [-additional-dnsname NAME]... [-additional-ipaddress IP]... [-days N] [-dir D]"},
		summary: "write a certificate and key of a role",
		desc: "Writes a certificate of one role (its name is ROLE.REGION.weft) and its key, signed by the CA in -dir " +
			"(or -ca and -key). Servers and agents also need the names and addresses clients dial them by.",
		examples: []string{
			"weft tls cert create -server -additional-ipaddress 10.0.0.1 -additional-dnsname s1.example.com",
			"weft tls cert create -agent",
			"weft tls cert create -client -dir ~/.weft",
		},
	},
}
