# The agents of docker-compose.yml; node_id and bind are given as flags.
data_dir      = "/data"
join          = ["172.28.0.11:8031", "172.28.0.12:8031", "172.28.0.13:8031"]
resources     = { memory_mb = 1024, vcores = 4 }
log_retention = "1h"
log_json      = true

# With ACLs on, a new node registers only with a node-join token. The agent
# reads this file at each registration attempt: after `weft acl bootstrap`,
# write one there with `weft node join-token create` (docs/operations.md,
# "Packaging").
join_token_file = "/secrets/join-token"

tls {
  ca_file   = "/secrets/weft-agent-ca.pem"
  cert_file = "/secrets/global-agent-weft.pem"
  key_file  = "/secrets/global-agent-weft-key.pem"
}
