# Capacity queues (SPEC §19): YARN Capacity Scheduler semantics for the
# whole tree. Apply with `weft queue apply examples/capacity-queues.hcl`.
queue "root" {
  type = "capacity"

  queue "prod" {
    capacity          = 60   # percent of the parent, guaranteed
    max_capacity      = 100  # may borrow all the rest while it is idle
    user_limit_factor = 2    # one user may use up to twice prod's capacity
  }

  queue "dev" {
    capacity     = 30
    max_capacity = 50

    queue "alice" {
      capacity          = 50
      user_limit_factor = 3  # alice alone may use all dev may
    }
    queue "bob" { capacity = 50 }
  }

  queue "default" {          # apps submitted without a queue
    capacity = 10
  }
}
