# An app spec: submit with `weft app submit -spec examples/app.hcl`.
name            = "hello"
queue           = "root.default"
priority        = 0
max_am_attempts = 2
am_resources    = { memory_mb = 256, vcores = 1 }

dshell {
  num_containers = 4
  resources      = { memory_mb = 128, vcores = 1 }
  container_type = "GUARANTEED"
  command        = ["sh", "-c", "echo hello from $WEFT_CONTAINER_ID on $WEFT_NODE_ID"]
  env            = { GREETING = "hello" }
  # Where the containers should run; left out, anywhere. relax_locality left
  # out (true) lets delay scheduling move them to the nodes' racks, then anywhere.
  # nodes          = ["node-1", "node-2"]
  # racks          = ["/default-rack"]
  # relax_locality = false
}
