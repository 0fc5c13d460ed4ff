package config

import (
	"strings"
	"testing"
)

func TestAppSpecNumContainers(t *testing.T) {
	spec, err := ParseAppSpec("a.hcl", []byte("dshell {\n  command = [\"true\"]\n}\n"))
	if err != nil || spec.DShell.NumContainers != 1 {
		t.Fatalf("num_containers left out: %v, %d; want the default 1", err, spec.DShell.NumContainers)
	}
	_, err = ParseAppSpec("a.hcl", []byte("dshell {\n  num_containers = 0\n  command = [\"true\"]\n}\n"))
	if err == nil || !strings.Contains(err.Error(), "num_containers: must be between 1 and") {
		t.Fatalf("num_containers = 0: %v", err)
	}
	spec, err = ParseAppSpec("a.json", []byte(`{"queue": "prod", "dshell": {"num_containers": 5, "command": ["sleep", "1"], "resources": {"memory_mb": 512, "vcores": 2}}}`))
	if err != nil || spec.Queue != "prod" || spec.DShell.NumContainers != 5 || spec.DShell.Resources.String() != "memory_mb=512,vcores=2" {
		t.Fatalf("JSON spec: %v %+v", err, spec)
	}
}

func TestAppSpecLocality(t *testing.T) {
	spec, err := ParseAppSpec("a.hcl", []byte("dshell {\n  command = [\"true\"]\n  nodes = [\"sc1-n1\", \"sc2-n3\"]\n  racks = [\"/r1\"]\n  relax_locality = false\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if loc := spec.DShell.Locality(); strings.Join(loc.Nodes, ",") != "sc1-n1,sc2-n3" || strings.Join(loc.Racks, ",") != "/r1" || loc.Relax {
		t.Fatalf("HCL locality %+v, want strict sc1-n1,sc2-n3 and /r1", loc)
	}
	spec, err = ParseAppSpec("a.json", []byte(`{"dshell": {"command": ["true"], "nodes": ["n1"]}}`))
	if err != nil || spec.DShell.RelaxLocality != nil || !spec.DShell.Locality().Relax || spec.DShell.Nodes[0] != "n1" {
		t.Fatalf("JSON spec without relax_locality: %v %+v; want n1, relaxed", err, spec.DShell)
	}
	_, err = ParseAppSpec("a.hcl", []byte("dshell {\n  command = [\"true\"]\n  nodes = [\"n1\", \"../n2\"]\n}\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "a.hcl: dshell.nodes[1]: ") {
		t.Fatalf("bad node: %v", err)
	}
}
