package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

type queueUsage struct {
	Name                   string `json:"name"`
	InstantaneousFairShare struct {
		Vcores int `json:"vcores"`
	} `json:"instantaneous_fair_share"`
	Used struct {
		Vcores int `json:"vcores"`
	} `json:"used"`
}

// Two saturated DRF queues of weight 3 and 1 converge to 3:1 of the
// cluster's 12 vcores (9:3), the second arriving while the first holds
// everything and freeing room only as its short tasks end.
func TestWeightedQueuesConvergeThreeToOne(t *testing.T) {
	w := startWorld(t)
	cfg := filepath.Join(t.TempDir(), "queues.hcl")
	os.WriteFile(cfg, []byte(`queue "root" {
  policy = "drf"
  queue "big" {
    weight = 3
    policy = "drf"
  }
  queue "small" {
    weight = 1
    policy = "drf"
  }
  queue "default" {}
}
`), 0o644)
	if _, errOut, code := cli(t, "queue", "apply", "-address", w.any(), cfg); code != 0 {
		t.Fatal(errOut)
	}
	w.submit("-queue", "small", "-num-containers", "200", "-memory-mb", "256", "--", "sleep", "1")
	waitFor(t, 30*time.Second, "the small queue to fill the cluster", func() error {
		if u := w.usage(); u["root.small"] < 10 {
			return fmt.Errorf("usage %v", u)
		}
		return nil
	})
	start := time.Now()
	w.submit("-queue", "big", "-num-containers", "200", "-memory-mb", "256", "--", "sleep", "1")
	waitFor(t, 60*time.Second, "usage to converge to 9:3 vcores", func() error {
		if u := w.usage(); u["root.big"] != 9 || u["root.small"] != 3 {
			return fmt.Errorf("usage %v", u)
		}
		return nil
	})
	t.Logf("weights 3:1 converged to 9:3 vcores %s after the second app arrived", time.Since(start).Round(100*time.Millisecond))
}

// usage returns the guaranteed vcores each queue uses.
func (w *world) usage() map[string]int {
	var qs []queueUsage
	if err := cliJSON(w.t, &qs, "queue", "list", "-address", w.any()); err != nil {
		w.t.Fatal(err)
	}
	out := map[string]int{}
	for _, q := range qs {
		out[q.Name] = q.Used.Vcores
	}
	return out
}
