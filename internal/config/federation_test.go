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

func TestServerFederationSettings(t *testing.T) {
	for _, tc := range []struct {
		id      string
		routers []string
		every   string
		want    string
	}{
		{"", nil, "5s", ""},
		{"sc1", []string{"10.0.1.1:8060"}, "5s", ""},
		{"sc1", nil, "5s", `subcluster_id (-subcluster-id) "sc1" needs the routers to report to: give -router HOST:PORT`},
		{"", []string{"10.0.1.1:8060"}, "5s", "routers (-router) given without subcluster_id (-subcluster-id): name this sub-cluster"},
		{"SC1", []string{"10.0.1.1:8060"}, "5s", `subcluster_id (-subcluster-id): sub-cluster ID "SC1": must start with a lower-case letter`},
		{"sc1", []string{"10.0.1.1"}, "5s", `routers (-router) "10.0.1.1": give HOST:PORT of a router, such as 10.0.1.1:8060`},
		{"sc1", []string{"10.0.1.1:8060"}, "1ms", `subcluster_heartbeat (-subcluster-heartbeat) "1ms": give a duration of at least 100ms such as 5s`},
	} {
		c := DefaultServer()
		c.SubclusterID, c.Routers, c.SubclusterHeartbeat = tc.id, tc.routers, tc.every
		_, _, _, err := c.Federation()
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q %v %s: %v, want %q", tc.id, tc.routers, tc.every, err, tc.want)
		}
	}
}

func TestServerUnmanagedAMTimeout(t *testing.T) {
	c := DefaultServer()
	if d, err := c.UnmanagedAMTimeoutDuration(); err != nil || d != DefaultUnmanagedAMTimeout {
		t.Fatalf("default %v, %v; want %v", d, err, DefaultUnmanagedAMTimeout)
	}
	for _, v := range []string{"10ms", "soon", ""} {
		c.UnmanagedAMTimeout = v
		if _, err := c.UnmanagedAMTimeoutDuration(); err == nil || !strings.HasPrefix(err.Error(), "unmanaged_am_timeout (-unmanaged-am-timeout)") {
			t.Errorf("%q: %v, want an error naming unmanaged_am_timeout", v, err)
		}
	}
}
