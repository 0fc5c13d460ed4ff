package sim

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/weft-sched/weft/scheduler"
)

// Task is one container's worth of work: it runs for Duration once
// started.
type Task struct {
	Duration      time.Duration
	Resources     scheduler.Resources
	ExecutionType scheduler.ExecutionType
	Priority      int32
	// Host is the node the trace ran it on (informational: asks carry no
	// locality yet).
	Host string
}

// Job is one app of a workload: submitted At after the run starts to
// Queue, its AM asks for a container per task.
type Job struct {
	ID    string
	Queue string
	At    time.Duration
	Tasks []Task
}

// Synthetic describes a generated workload.
type Synthetic struct {
	// AppsPerSecond is the mean arrival rate (Poisson arrivals); 0 makes
	// no apps at all (a heartbeat-only run).
	AppsPerSecond float64
	// Apps is how many apps arrive in all (0: as many as Duration allows).
	Apps int
	// Duration bounds arrivals.
	Duration time.Duration
	// TasksMin and TasksMax bound each app's task count (uniform).
	TasksMin, TasksMax int
	// TaskMin and TaskMax bound a task's duration (uniform).
	TaskMin, TaskMax time.Duration
	Resources        scheduler.Resources
	// Queues are picked from in proportion to their weights.
	Queues map[string]float64
	// Opportunistic is the fraction of apps whose tasks are opportunistic.
	Opportunistic float64
	Seed          uint64
}

// Validate names the first bad setting.
func (s *Synthetic) Validate() error {
	switch {
	case s.AppsPerSecond < 0:
		return fmt.Errorf("apps per second must not be negative")
	case s.TasksMin < 1 || s.TasksMax < s.TasksMin:
		return fmt.Errorf("tasks per app: want 1 ≤ min ≤ max, got %d..%d", s.TasksMin, s.TasksMax)
	case s.TaskMin <= 0 || s.TaskMax < s.TaskMin:
		return fmt.Errorf("task duration: want 0 < min ≤ max, got %s..%s", s.TaskMin, s.TaskMax)
	case s.Opportunistic < 0 || s.Opportunistic > 1:
		return fmt.Errorf("opportunistic fraction must be between 0 and 1, got %g", s.Opportunistic)
	case s.Apps == 0 && s.Duration <= 0:
		return fmt.Errorf("give a number of apps or a duration")
	}
	if err := scheduler.ValidateContainerResources(s.Resources); err != nil {
		return fmt.Errorf("task resources: %w", err)
	}
	return nil
}

// Generate returns the workload's jobs in arrival order; the same seed
// gives the same jobs.
func (s *Synthetic) Generate() ([]Job, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.AppsPerSecond == 0 {
		return nil, nil
	}
	rng := rand.New(rand.NewPCG(s.Seed, s.Seed^0x5eed))
	queues := make([]string, 0, len(s.Queues))
	total := 0.0
	for q, w := range s.Queues {
		queues = append(queues, q)
		total += w
	}
	sort.Strings(queues)
	if len(queues) == 0 {
		queues, total = []string{scheduler.DefaultQueue}, 1
		s.Queues = map[string]float64{scheduler.DefaultQueue: 1}
	}
	pickQueue := func() string {
		x := rng.Float64() * total
		for _, q := range queues {
			if x -= s.Queues[q]; x < 0 {
				return q
			}
		}
		return queues[len(queues)-1]
	}
	var jobs []Job
	at := time.Duration(0)
	for i := 0; s.Apps == 0 || i < s.Apps; i++ {
		if i > 0 {
			at += time.Duration(rng.ExpFloat64() / s.AppsPerSecond * float64(time.Second))
		}
		if s.Duration > 0 && at >= s.Duration {
			break
		}
		et := scheduler.Guaranteed
		if rng.Float64() < s.Opportunistic {
			et = scheduler.Opportunistic
		}
		n := s.TasksMin + rng.IntN(s.TasksMax-s.TasksMin+1)
		j := Job{ID: fmt.Sprintf("sim-%d", i), Queue: pickQueue(), At: at, Tasks: make([]Task, n)}
		for k := range j.Tasks {
			d := s.TaskMin + time.Duration(rng.Int64N(int64(s.TaskMax-s.TaskMin)+1))
			j.Tasks[k] = Task{Duration: d, Resources: s.Resources, ExecutionType: et}
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}
