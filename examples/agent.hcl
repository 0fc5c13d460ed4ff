# An agent's configuration file: weft agent -config examples/agent.hcl
# Flags given on the command line win over the file. Every setting an agent
# has is here; those commented out show their default.

node_id  = "agent-1"             # default: the hostname
data_dir = "/var/lib/weft-agent" # container directories, logs, serf state, the node secret
bind     = "10.0.0.11"           # the address servers and AMs reach this agent at
# rpc_port  = 8049               # AMRMProxy and container management
# serf_port = 8041               # gossip (TCP and UDP)
# http_port = 8089               # health, metrics and container logs over HTTP(S); 0: off

# Any server or agent's serf address; the agent finds the rest by gossip.
join = ["10.0.0.1:8031", "10.0.0.2:8031", "10.0.0.3:8031"]

# What this node offers; memory_mb and vcores are required, other names are
# extended resources that apps may ask for.
resources = { memory_mb = 16384, vcores = 8, gpu = 2 }
rack      = "/rack-2"

opportunistic_queue_length = 10    # opportunistic containers that may wait here
lazy_heartbeats            = false # true: heartbeat only every second

# Who containers run as when the agent runs as root: the uid the servers
# gave their app (one per running app, from their dynamic_uid_range, which
# must lie within this agent's); run_as_user picks the submitting user's
# account instead where it exists here. Never root unless allow_root.
allow_root  = false
run_as_user = true
# dynamic_uid_range = "70000-79999" # or "off": containers without an account run as nobody

# A completed container's directory and logs are removed this long after it
# completed, once its app has ended (a MapReduce job's reduces read map output
# from it while the job runs).
log_retention = "24h"

log_level = "info"
log_json  = true # one JSON object a line, for a log shipper

# Security (docs/security.md): mutual TLS, gossip encryption.
region  = "global"
encrypt = "cg8StVXbQJ0gPvMd9o7yrg6rA0Z2dTjCbG4JkJoRuFI=" # weft operator keygen
# insecure = false                # true: allow running off loopback without TLS or a gossip key

# With ACLs on, the servers register a node they do not know only with a
# node-join token (weft node join-token create): give it here, in
# WEFT_JOIN_TOKEN, or in a file read at each registration attempt.
# join_token      = "..."
join_token_file = "/etc/weft/join-token"

tls {
  ca_file   = "/etc/weft/tls/weft-agent-ca.pem"
  cert_file = "/etc/weft/tls/global-agent-weft.pem"
  key_file  = "/etc/weft/tls/global-agent-weft-key.pem"
}

limits {
  rpc_max_conns_per_client = 100
  rpc_handshake_timeout    = "5s"
  rpc_idle_timeout         = "5m"
  rpc_max_streams_per_conn = 64
}
