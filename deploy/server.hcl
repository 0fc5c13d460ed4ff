# The servers of docker-compose.yml; node_id and bind are given as flags.
data_dir         = "/data"
bootstrap_expect = 3
join             = ["172.28.0.11:8031", "172.28.0.12:8031", "172.28.0.13:8031"]
log_json         = true

# The gossip key is the keyring the init service wrote into /data.
acl {
  enabled = true
}

tls {
  ca_file   = "/secrets/weft-agent-ca.pem"
  cert_file = "/secrets/global-server-weft.pem"
  key_file  = "/secrets/global-server-weft-key.pem"
}
