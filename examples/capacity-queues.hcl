# Capacity queues (SPEC §19): YARN Capacity Scheduler semantics for the
# whole tree. Apply with `weft queue apply examples/capacity-queues.hcl`.
queue "root" {
  type = "capacity"

  queue "prod" {
    capacity          = 69   # percent of the parent, guaranteed
    max_capacity      = 100  # may borrow up to all of it while dev is idle
    user_limit_factor = 2    # one user may use up to twice prod's capacity
  }

  queue "dev" {
    capacity     = 30
    max_capacity = 50

    queue "alice" { capacity = 50 }
    queue "bob"   { capacity = 50 }
  }

  queue "default" {
    capacity = 1             # apps submitted without a queue; siblings sum to 100
  }
}
