package main

import (
	"strings"
	"testing"

	"github.com/weft-sched/weft/scheduler"
)

func TestAddressesAreCheckedWithAHint(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8030":              "",
		"[::1]:8030":                  "",
		"127.0.0.1":                   "missing the port; use 127.0.0.1:8030",
		"http://10.0.0.1:8030":        "without a scheme, e.g. 10.0.0.1:8030",
		"10.0.0.1:http":               `port "http" is not a number`,
		":8030":                       "missing the host",
		"127.0.0.1:8030,127.0.0.2":    "missing the port; use 127.0.0.2:8030",
		"127.0.0.1:8030, 127.0.0.2:1": "",
	} {
		cf := &clientFlags{address: addr}
		_, err := cf.addresses()
		switch {
		case want == "" && err != nil:
			t.Errorf("%q refused: %v", addr, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: got %v, want %q", addr, err, want)
		}
	}
}

func TestSpecFlagsOverrideTheFile(t *testing.T) {
	file := scheduler.AppSpec{Name: "from-file", Queue: "root.a", User: "u", DShell: scheduler.DShell{NumContainers: 3,
		Resources: scheduler.Resources{MemoryMB: 512, Vcores: 2}, Command: []string{"true"}}}
	flags := scheduler.AppSpec{Queue: "root.b", DShell: scheduler.DShell{NumContainers: 7, Resources: scheduler.Resources{MemoryMB: 128, Vcores: 4}}}
	got := mergeSpec(file, flags, map[string]bool{"queue": true, "vcores": true})
	if got.Name != "from-file" || got.Queue != "root.b" || got.DShell.NumContainers != 3 ||
		got.DShell.Resources.String() != "memory_mb=512,vcores=4" || got.DShell.Command[0] != "true" {
		t.Fatalf("merged %+v", got)
	}
}
