package scheduler

import (
	"strings"
	"testing"
)

func TestDShellLocalityValidation(t *testing.T) {
	no := false
	many := make([]string, MaxDShellLocality+1)
	for i := range many {
		many[i] = "n" + strings.Repeat("x", i%7)
	}
	for _, tc := range []struct {
		name  string
		shell DShell
		want  string // "" for a valid spec, else what the error begins with
	}{
		{"none", DShell{}, ""},
		{"nodes", DShell{Nodes: []string{"n1", "node_2.rack-a"}}, ""},
		{"racks", DShell{Racks: []string{"/default-rack", "/dc1/r 7"}}, ""},
		{"strict nodes", DShell{Nodes: []string{"n1"}, RelaxLocality: &no}, ""},
		{"strict racks", DShell{Racks: []string{"/r1"}, RelaxLocality: &no}, ""},
		{"as many nodes as allowed", DShell{Nodes: many[:MaxDShellLocality]}, ""},
		{"bad node", DShell{Nodes: []string{"n1", "n2", "n3", "a/b"}}, `dshell.nodes[3]: node id "a/b"`},
		{"empty node", DShell{Nodes: []string{""}}, "dshell.nodes[0]: node id"},
		{"long node", DShell{Nodes: []string{strings.Repeat("a", MaxNodeIDLength+1)}}, "dshell.nodes[0]: node id"},
		{"too many nodes", DShell{Nodes: many}, "dshell.nodes: 1025 entries; at most 1024"},
		{"too many racks", DShell{Racks: many}, "dshell.racks: 1025 entries; at most 1024"},
		{"empty rack", DShell{Racks: []string{"/r1", ""}}, "dshell.racks[1]: rack"},
		{"control in rack", DShell{Racks: []string{"/r1\n"}}, "dshell.racks[0]: rack"},
		{"long rack", DShell{Racks: []string{strings.Repeat("r", MaxIDLength+1)}}, "dshell.racks[0]: rack"},
		{"strict nowhere", DShell{RelaxLocality: &no}, "dshell.relax_locality: false needs nodes or racks"},
	} {
		spec := AppSpec{DShell: tc.shell}
		spec.DShell.NumContainers, spec.DShell.Command = 1, []string{"true"}
		spec.SetDefaults()
		err := spec.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error beginning %q", tc.name, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "\n"):
			t.Errorf("%s: error spans lines: %q", tc.name, err)
		}
	}
}

// An unset relax_locality relaxes, as YARN's does and as every app
// recorded before the field existed must.
func TestDShellLocalityRelaxesUnlessTold(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		relax *bool
		want  bool
	}{{nil, true}, {&yes, true}, {&no, false}} {
		d := DShell{Nodes: []string{"n1"}, Racks: []string{"/r1"}, RelaxLocality: tc.relax}
		got := d.Locality()
		if got.Relax != tc.want || len(got.Nodes) != 1 || got.Nodes[0] != "n1" || len(got.Racks) != 1 || got.Racks[0] != "/r1" {
			t.Errorf("relax_locality %v: locality %+v, want relax=%v on n1 and /r1", tc.relax, got, tc.want)
		}
	}
}
