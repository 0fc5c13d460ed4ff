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
