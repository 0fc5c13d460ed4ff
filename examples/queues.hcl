# An example queue configuration: apply it with `weft queue apply examples/queues.hcl`.
scheduler {
  placement = "spread"
  preemption {
    enabled                       = true
    cluster_utilization_threshold = 0.8
    wait_before_kill              = "15s"
  }
}

queue "root" {
  policy = "drf"

  queue "prod" {
    weight        = 3
    min_resources = { memory_mb = 4096, vcores = 4 }
    preemptable   = false
    fair_share_preemption_threshold = 0.8
    fair_share_preemption_timeout   = "5s"
  }

  queue "dev" {
    weight = 1
  }

  queue "default" {}
}
