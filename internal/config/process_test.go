package config

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
)

// load is what `weft agent` does: defaults, flags, then the file under them.
func loadAgent(t *testing.T, file string, args ...string) (*Agent, error) {
	t.Helper()
	cfg := DefaultAgent()
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	RegisterFlags(fs, cfg)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if file != "" {
		if err := MergeFile(cfg, "a.hcl", []byte(file), set); err != nil {
			return nil, err
		}
	}
	return cfg, cfg.Validate()
}

func TestFlagsWinOverTheFileWhichWinsOverDefaults(t *testing.T) {
	file := `
node_id   = "n7"
data_dir  = "/var/lib/weft"
join      = ["10.0.0.1"]
rack      = "/r2"
resources = { memory_mb = 4096, vcores = 2, gpu = 1 }
opportunistic_queue_length = 0
`
	cfg, err := loadAgent(t, file, "-rack", "/r9", "-join", "10.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultAgent()
	want.NodeID, want.DataDir, want.Rack, want.Join = "n7", "/var/lib/weft", "/r9", []string{"10.0.0.2"}
	want.Resources = map[string]int64{"memory_mb": 4096, "vcores": 2, "gpu": 1}
	want.OpportunisticQueueLength = 0 // set to zero in the file: not the default 10
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("merged\n %+v\nwant\n %+v", cfg, want)
	}
	if got := cfg.NodeCapacity(); got.String() != "memory_mb=4096,vcores=2,gpu=1" {
		t.Fatalf("capacity %s", got)
	}
}

func TestBadAgentSettingsAreRefusedByName(t *testing.T) {
	for _, tc := range []struct {
		file string
		args []string
		want string
	}{
		{"", []string{"-data-dir", "d", "-join", "x", "-resources", "memory_mb=0,vcores=8"}, "memory_mb must be given and positive"},
		{"", []string{"-data-dir", "d", "-join", "x", "-resources", "vcores=8"}, "memory_mb must be given and positive"},
		{"", []string{"-data-dir", "d", "-join", "x", "-resources", "memroy_mb=8192,vcores=8"}, `unknown resource "memroy_mb"; did you mean memory_mb?`},
		{"", []string{"-data-dir", "d", "-join", "x", "-resources", "memory_mb=8192,cpus=8"}, `unknown resource "cpus"; did you mean vcores?`},
		{"", []string{"-data-dir", "d", "-join", "x", "-resources", "memory_mb=8192,vcores=-1"}, "vcores must not be negative"},
		{"", []string{"-data-dir", "d"}, "join (-join) is required"},
		{"", []string{"-join", "x"}, "data_dir (-data-dir) is required"},
		{"", []string{"-data-dir", "d", "-join", "x", "-bind", "0.0.0.0"}, "bind (-bind)"},
		{"", []string{"-data-dir", "d", "-join", "x", "-node-id", "a b"}, "node_id (-node-id)"},
		{"", []string{"-data-dir", "d", "-join", "x", "-log-level", "loud"}, "log_level"},
		{"resources = { memory_mb = 1024 }\n", []string{"-data-dir", "d", "-join", "x"}, "vcores must be given and positive"},
		{"rack = 7\nbogus = 1\n", []string{"-data-dir", "d", "-join", "x"}, "a.hcl:2"},
	} {
		_, err := loadAgent(t, tc.file, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q %v: got %v, want an error with %q", tc.file, tc.args, err, tc.want)
		}
	}
	if _, err := loadAgent(t, "", "-data-dir", "d", "-join", "x", "-resources", "memory_mb=8192,vcores=8,gpu=2"); err != nil {
		t.Fatalf("a valid agent refused: %v", err)
	}
}

func TestServerConfigFile(t *testing.T) {
	cfg := DefaultServer()
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	RegisterFlags(fs, cfg)
	if err := fs.Parse([]string{"-data-dir", "/d"}); err != nil {
		t.Fatal(err)
	}
	src := "node_id = \"s1\"\nbootstrap_expect = 3\njoin = [\"127.0.0.2\", \"127.0.0.3\"]\ndata_dir = \"/ignored\"\n"
	if err := MergeFile(cfg, "s.hcl", []byte(src), map[string]bool{"data-dir": true}); err != nil {
		t.Fatal(err)
	}
	if cfg.NodeID != "s1" || cfg.BootstrapExpect != 3 || len(cfg.Join) != 2 || cfg.DataDir != "/d" || cfg.RPCPort != DefaultServerRPCPort {
		t.Fatalf("merged %+v", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := MergeFile(DefaultServer(), "s.hcl", []byte("bootstrap_expect = \"three\"\n"), nil); err == nil || !strings.Contains(err.Error(), "s.hcl:1") {
		t.Fatalf("bad server file: %v", err)
	}
	bad := DefaultServer()
	bad.DataDir, bad.BootstrapExpect = "/d", -1
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "bootstrap_expect") {
		t.Fatalf("negative bootstrap_expect: %v", err)
	}
}

func TestSecurityBlocksMerge(t *testing.T) {
	cfg := DefaultServer()
	src := "data_dir = \"/d\"\ninsecure = true\ntls {\n  ca_file = \"ca.pem\"\n  cert_file = \"s.pem\"\n  key_file = \"s-key.pem\"\n}\nacl {\n  enabled = true\n}\nlimits {\n  rpc_max_conns_per_client = 7\n}\n"
	if err := MergeFile(cfg, "s.hcl", []byte(src), nil); err != nil {
		t.Fatal(err)
	}
	if !cfg.Insecure || !cfg.TLS.Enabled() || cfg.TLS.KeyFile != "s-key.pem" || !cfg.ACL.Enabled || cfg.Limits.Resolve().MaxConnsPerClient != 7 {
		t.Fatalf("blocks not merged: %+v tls=%+v acl=%+v limits=%+v", cfg, cfg.TLS, cfg.ACL, cfg.Limits)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.TLS.KeyFile = ""
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "tls.key_file") {
		t.Fatalf("missing key file: %v", err)
	}
	bad := DefaultServer()
	if err := MergeFile(bad, "s.hcl", []byte("data_dir = \"/d\"\nlimits {\n  rpc_idle_timeout = \"soon\"\n}\n"), nil); err != nil {
		t.Fatal(err)
	}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "limits.rpc_idle_timeout") {
		t.Fatalf("bad duration: %v", err)
	}
}

func TestSecureByDefault(t *testing.T) {
	open := DefaultServer()
	gaps := open.SecurityGaps(false)
	if len(gaps) != 3 {
		t.Fatalf("an open server lacks %v, want TLS, gossip key and ACLs", gaps)
	}
	// Open on loopback starts, but says every local user can reach it, and
	// repeats it (an INSECURE warning).
	if w, err := CheckSecure("server", "127.0.0.2", gaps, false); err != nil || !strings.HasPrefix(w, "INSECURE") || !strings.Contains(w, "every user and program of this machine") {
		t.Fatalf("loopback: %q %v", w, err)
	}
	if _, err := CheckSecure("server", "10.1.2.3", gaps, false); err == nil || !strings.Contains(err.Error(), "-insecure") || !strings.Contains(err.Error(), "ACLs") {
		t.Fatalf("open off loopback must be refused naming what is missing and -insecure: %v", err)
	}
	if w, err := CheckSecure("server", "10.1.2.3", gaps, true); err != nil || !strings.HasPrefix(w, "INSECURE") {
		t.Fatalf("-insecure: %q %v", w, err)
	}
	secure := DefaultServer()
	secure.TLS = &TLS{CAFile: "ca", CertFile: "c", KeyFile: "k"}
	secure.Encrypt = "key"
	secure.ACL = &ACL{Enabled: true}
	if g := secure.SecurityGaps(false); len(g) != 0 {
		t.Fatalf("a secure server lacks %v", g)
	}
	if g := open.SecurityGaps(true); len(g) != 2 || strings.Contains(strings.Join(g, ","), "gossip") {
		t.Fatalf("a keyring file in the data dir is a gossip key: %v", g)
	}
	agent := DefaultAgent()
	agent.TLS, agent.Encrypt = secure.TLS, "key"
	if g := agent.SecurityGaps(false); len(g) != 0 {
		t.Fatalf("a secure agent lacks %v (agents have no ACL block)", g)
	}
}

func TestRaftSkipIndexFromFileAndFlag(t *testing.T) {
	cfg := DefaultServer()
	if err := MergeFile(cfg, "s.hcl", []byte("data_dir = \"/d\"\nraft_skip_index = 1234\n"), nil); err != nil {
		t.Fatal(err)
	}
	if cfg.RaftSkipIndex != 1234 {
		t.Fatalf("raft_skip_index from the file = %d", cfg.RaftSkipIndex)
	}
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	flagged := DefaultServer()
	RegisterFlags(fs, flagged)
	if err := fs.Parse([]string{"-raft-skip-index", "77"}); err != nil || flagged.RaftSkipIndex != 77 {
		t.Fatalf("-raft-skip-index: %v, %d", err, flagged.RaftSkipIndex)
	}
	if err := fs.Parse([]string{"-raft-skip-index", "-1"}); err == nil {
		t.Fatalf("a negative index was accepted")
	}
	if DefaultServer().RaftSkipIndex != 0 {
		t.Fatalf("the default skips an entry")
	}
}
