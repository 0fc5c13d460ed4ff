package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

func TestSubmitLocalityFlags(t *testing.T) {
	spec, _, _, err := parseSubmit([]string{"-nodes", "sc1-n1, sc2-n4", "-nodes", "sc2-n5", "-racks", "/r1", "-relax-locality=false", "--", "hostname"})
	if err != nil {
		t.Fatal(err)
	}
	loc := spec.DShell.Locality()
	if !reflect.DeepEqual(loc.Nodes, []string{"sc1-n1", "sc2-n4", "sc2-n5"}) || !reflect.DeepEqual(loc.Racks, []string{"/r1"}) || loc.Relax {
		t.Fatalf("locality %+v, want strict sc1-n1, sc2-n4, sc2-n5 and /r1", loc)
	}
	// Without the flags the app runs anywhere, and -relax-locality's
	// default leaves the spec's field unset: the servers relax.
	spec, _, _, err = parseSubmit([]string{"--", "hostname"})
	if err != nil || spec.DShell.Nodes != nil || spec.DShell.Racks != nil || spec.DShell.RelaxLocality != nil {
		t.Fatalf("no locality flags: %v %+v", err, spec.DShell)
	}
	spec, _, _, err = parseSubmit([]string{"-nodes", "n1", "--", "hostname"})
	if err != nil || !spec.DShell.Locality().Relax {
		t.Fatalf("-nodes alone: %v %+v; want relaxed", err, spec.DShell)
	}
}

// A -spec file's locality holds unless a flag is given for it.
func TestSubmitLocalityFlagsOverrideTheFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "app.hcl")
	src := "dshell {\n  command = [\"true\"]\n  nodes = [\"n1\"]\n  racks = [\"/r1\"]\n  relax_locality = false\n}\n"
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	spec, _, _, err := parseSubmit([]string{"-spec", file, "-nodes", "n2,n3"})
	if err != nil {
		t.Fatal(err)
	}
	if loc := spec.DShell.Locality(); !reflect.DeepEqual(loc.Nodes, []string{"n2", "n3"}) || !reflect.DeepEqual(loc.Racks, []string{"/r1"}) || loc.Relax {
		t.Fatalf("locality %+v, want the flag's n2,n3, the file's /r1 and its relax_locality = false", loc)
	}
	spec, _, _, err = parseSubmit([]string{"-spec", file, "-relax-locality"})
	if err != nil || !spec.DShell.Locality().Relax {
		t.Fatalf("-relax-locality over relax_locality = false: %v %+v", err, spec.DShell)
	}
}

// Bad locality is refused before any server is called, in one line that
// names the field.
func TestSubmitLocalityFlagsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-nodes", "n1,../n2"}, "invalid app: dshell.nodes[1]: "},
		{[]string{"-relax-locality=false"}, "invalid app: dshell.relax_locality: "},
	} {
		args := append(append([]string{"app", "submit", "-address", "127.0.0.1:1"}, tc.args...), "--", "true")
		code, _, errOut := runCaptured(t, args...)
		if code != 2 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("weft %v: exit %d, stderr %q; want exit 2 and one line with %q", args, code, errOut, tc.want)
		}
	}
}

// printAppOutput is what `weft app status` prints for a.
func printAppOutput(t *testing.T, a rpc.AppInfo) string {
	t.Helper()
	var out bytes.Buffer
	old := stdout
	stdout = &out
	defer func() { stdout = old }()
	printApp(a)
	return out.String()
}

// The counters come after the rest, sorted by name, names aligned on the
// left and values on the right with thousands separated; an app without
// counters prints exactly what it did before.
func TestAppStatusPrintsCounters(t *testing.T) {
	a := rpc.AppInfo{ID: "app-7", Name: "wordcount", Queue: "root.default", User: "alice", State: "RUNNING",
		SubmittedAt: time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC).UnixNano()}
	plain := printAppOutput(t, a)
	if strings.Contains(plain, "Counters") {
		t.Fatalf("an app without counters prints a counters section:\n%s", plain)
	}
	a.Counters = scheduler.Counters{"shuffle.bytes.off_rack": 1234567, "maps.data_local": 12, "maps.off_rack": 0, "wtnd": -1500}
	got := printAppOutput(t, a)
	rest, counters, ok := strings.Cut(got, "Counters:\n")
	if !ok || rest != plain {
		t.Fatalf("output with counters:\n%s\nwant the output without them, then the counters section:\n%s", got, plain)
	}
	want := "" +
		"  maps.data_local                12\n" +
		"  maps.off_rack                   0\n" +
		"  shuffle.bytes.off_rack  1,234,567\n" +
		"  wtnd                       -1,500\n"
	if counters != want {
		t.Fatalf("counters section:\n%s\nwant:\n%s", counters, want)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", -1000: "-1,000", 123456: "123,456",
		-9223372036854775808: "-9,223,372,036,854,775,808"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// The blacklist shows after the attempts, with why, and whether it is in
// force; an app without one prints no line for it.
func TestAppStatusPrintsTheBlacklist(t *testing.T) {
	a := rpc.AppInfo{ID: "app-8", Name: "sh", Queue: "root.default", User: "alice", State: "RUNNING", MaxFailuresPerNode: 3}
	if plain := printAppOutput(t, a); strings.Contains(plain, "Blacklisted") {
		t.Fatalf("an app without a blacklist prints one:\n%s", plain)
	}
	a.Blacklist = []string{"a0", "a7"}
	if got := printAppOutput(t, a); !strings.Contains(got, "Blacklisted nodes  a0, a7 (after 3 failures on each)\n") {
		t.Fatalf("blacklist in force:\n%s", got)
	}
	a.BlacklistIgnored = true
	if got := printAppOutput(t, a); !strings.Contains(got, "a0, a7 (ignored: it names 33% or more of the READY nodes)") {
		t.Fatalf("blacklist ignored:\n%s", got)
	}
}
