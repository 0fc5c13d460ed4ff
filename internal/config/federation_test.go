package config

import (
	"strings"
	"testing"

	"github.com/weft-sched/weft/scheduler/federation"
)

func TestParsePolicies(t *testing.T) {
	src := `
default { router = "load" }
queue "root.prod" {
  router    = "weighted"
  amrmproxy = "locality"
  weights   = { sc1 = 2, sc-east = 1 }
}
queue "root.batch" { router = "weighted" }
`
	ps, err := ParsePolicies("fed.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 || ps[0].Queue != "" || ps[0].Router != federation.Load || ps[1].Weights["sc-east"] != 1 ||
		ps[1].AMRMProxy != federation.AMRMLocality || ps[2].Weights != nil {
		t.Fatalf("policies %+v", ps)
	}
	for _, tc := range []struct{ src, want string }{
		{`queue "root.a" { router = "fastest" }`, `fed.hcl:1,1: Invalid policy: queue "root.a": router: "fastest" is not a router policy`},
		{`queue "root.a" { amrmproxy = "home" }`, `fed.hcl:1,18: Missing required argument: The argument "router" is required`},
		{"queue \"root.a\" {\n router = \"weighted\"\n weights = { sc1 = -1 }\n}", `fed.hcl:3,2: Invalid weight: sc1: give a whole number from 0 to 1000000`},
		{`default { router = "load" }` + "\n" + `default { router = "hash" }`, `fed.hcl:2,1: Duplicate policy: this queue has a policy at line 1 already`},
		{`queue "a" { router = "load" }`, `queue "a": queue: must be a queue path such as root.prod`},
		{`pool "x" {}`, `Unsupported block type`},
	} {
		_, err := ParsePolicies("fed.hcl", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %s", tc.src, err, tc.want)
		}
	}
}
