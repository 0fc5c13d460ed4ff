# Capacity queues: YARN Capacity Scheduler semantics for the whole tree
# (docs/queues.md). Apply with `weft queue apply examples/capacity-queues.hcl`.
scheduler {
  capacity {
    minimum_allocation  = { memory_mb = 1024, vcores = 1 } # capacities and user limits round to it
    reservation_timeout = "5m"                              # a node held for a large container is given back after this
  }
}

queue "root" {
  type                        = "capacity"
  maximum_am_resource_percent = 0.1 # AMs may hold 10% of each queue's max capacity (one app always runs)

  queue "prod" {
    capacity                   = 60  # percent of the parent, guaranteed
    max_capacity               = 100 # may borrow all the rest while it is idle
    user_limit_factor          = 2   # one user may use up to twice prod's capacity
    minimum_user_limit_percent = 25  # with four active users or more, each gets at least a quarter
  }

  queue "dev" {
    capacity     = 30
    max_capacity = 50

    queue "alice" {
      capacity          = 50
      user_limit_factor = 3 # alice alone may use all dev may
    }
    queue "bob" { capacity = 50 }
  }

  queue "default" { # apps submitted without a queue
    capacity = 10
  }
}
