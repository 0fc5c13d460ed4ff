package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// weft sim's restart flags: a restart or extra server settings only for
// servers it starts, a restart before the run's end, a known signal, and a
// -server-config the server would take, without a limits block.
func TestSimRestartFlags(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keep := write("keep.hcl", "max_completed_apps = 100000\n")
	limits := write("limits.hcl", "limits {\n  rpc_max_conns_per_client = 5\n}\n")
	unknown := write("unknown.hcl", "no_such_setting = 1\n")
	for _, tc := range []struct {
		name         string
		start        int
		at           time.Duration
		signal, conf string
		want         string // part of the usage error; "" for none
		wantSig      syscall.Signal
	}{
		{name: "no restart", start: 3, signal: "kill"},
		{name: "kill", start: 3, at: 40 * time.Second, signal: "kill", wantSig: syscall.SIGKILL},
		{name: "term with config", start: 3, at: 40 * time.Second, signal: "term", conf: keep, wantSig: syscall.SIGTERM},
		{name: "given servers", at: 40 * time.Second, signal: "kill", want: "need -start-servers"},
		{name: "config for given servers", signal: "kill", conf: keep, want: "need -start-servers"},
		{name: "after the end", start: 3, at: time.Minute, signal: "kill", want: "before the run's end"},
		{name: "bad signal", start: 3, at: 40 * time.Second, signal: "hup", want: `-restart-signal "hup"`},
		{name: "limits block", start: 3, signal: "kill", conf: limits, want: "has a limits block"},
		{name: "unknown setting", start: 3, signal: "kill", conf: unknown, want: "-server-config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, extra, err := simRestartFlags(tc.start, time.Minute, tc.at, tc.signal, tc.conf)
			if tc.want != "" {
				var ue *usageError
				if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, want a usage error with %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (tc.at == 0) != (rc == nil) || rc != nil && (rc.At != tc.at || rc.Signal != tc.wantSig) {
				t.Errorf("restart %+v for -restart-at %s -restart-signal %s", rc, tc.at, tc.signal)
			}
			if tc.conf == keep && extra != "max_completed_apps = 100000\n" {
				t.Errorf("extra server config %q", extra)
			}
		})
	}
}
