package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestAgentExampleFileSetsEverySetting parses examples/agent.hcl as
// `weft agent -config` does and checks that it is valid and names every
// setting an agent has, so the example stays the agent's full reference.
func TestAgentExampleFileSetsEverySetting(t *testing.T) {
	src, err := os.ReadFile("../../examples/agent.hcl")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := loadAgent(t, string(src))
	if err != nil {
		t.Fatalf("examples/agent.hcl: %v", err)
	}
	if cfg.NodeID != "agent-1" || cfg.NodeCapacity().String() != "memory_mb=16384,vcores=8,gpu=2" || !cfg.LogJSON ||
		!cfg.RunAsUser || len(cfg.Join) != 3 || !cfg.TLS.Enabled() || cfg.Limits == nil || cfg.Limits.RPCMaxStreamsPerConn != 64 {
		t.Errorf("examples/agent.hcl read as %+v", cfg)
	}
	if d, _ := cfg.LogRetentionDuration(); d != 24*time.Hour {
		t.Errorf("log_retention %v, want 24h", d)
	}
	typ := reflect.TypeOf(Agent{})
	for i := 0; i < typ.NumField(); i++ {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("hcl"), ",")
		if !strings.Contains(string(src), "\n"+name+" ") && !strings.Contains(string(src), "# "+name+" ") {
			t.Errorf("examples/agent.hcl does not show the setting %s", name)
		}
	}
}

func TestLogSettings(t *testing.T) {
	cfg, err := loadAgent(t, "log_retention = \"90m\"\nlog_json = true\n", "-data-dir", "d", "-join", "x")
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := cfg.LogRetentionDuration(); d != 90*time.Minute || !cfg.LogJSON {
		t.Errorf("log_retention %v, log_json %v", d, cfg.LogJSON)
	}
	if d, _ := DefaultAgent().LogRetentionDuration(); d != DefaultLogRetention {
		t.Errorf("default log_retention %v", d)
	}
	for _, bad := range []string{"0s", "-1h", "a day"} {
		if _, err := loadAgent(t, "", "-data-dir", "d", "-join", "x", "-log-retention", bad); err == nil || !strings.Contains(err.Error(), "log_retention (-log-retention)") {
			t.Errorf("-log-retention %s: %v", bad, err)
		}
	}
	srv := DefaultServer()
	if err := MergeFile(srv, "s.hcl", []byte("log_json = true\n"), nil); err != nil || !srv.LogJSON {
		t.Errorf("server log_json: %v, %v", err, srv.LogJSON)
	}
}
