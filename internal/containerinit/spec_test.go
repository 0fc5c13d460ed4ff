package containerinit

import (
	"bufio"
	"bytes"
	"strings"
	"syscall"
	"testing"
)

func TestSpecRoundTrip(t *testing.T) {
	in := &Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "echo hi"}, Env: []string{"A=1", "LD_PRELOAD=/x.so"},
		Account: &Account{UID: 65534, GID: 65534, Groups: []uint32{}}, Keep: []string{"/tmp/d"}}
	var buf bytes.Buffer
	if err := WriteSpec(&buf, in); err != nil {
		t.Fatal(err)
	}
	out, err := readSpec(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if out.Path != in.Path || strings.Join(out.Args, " ") != "sh -c echo hi" || len(out.Env) != 2 || out.Account.UID != 65534 || out.Keep[0] != "/tmp/d" {
		t.Fatalf("read back %+v", out)
	}
}

func TestSpecRefusals(t *testing.T) {
	for name, text := range map[string]string{
		"no command":   `{"env":["A=1"]}`,
		"no argv":      `{"path":"/bin/true"}`,
		"not json":     `exec rm -rf /`,
		"cut short":    `{"path":"/bin/tr`,
		"beyond bound": `{"path":"/bin/true","args":["` + strings.Repeat("x", maxSpecBytes) + `"]}`,
	} {
		if s, err := readSpec(strings.NewReader(text)); err == nil {
			t.Errorf("%s: read %+v", name, s)
		}
	}
	if s, err := readSpec(strings.NewReader(`{"probe":true}`)); err != nil || !s.Probe {
		t.Errorf("a probe: %+v, %v", s, err)
	}
}

func TestReports(t *testing.T) {
	var buf bytes.Buffer
	writeReport(&buf, reportStarted, "")
	writeReport(&buf, reportExited, "9")
	r := bufio.NewReader(&buf)
	if err := ReadStart(r); err != nil {
		t.Fatal(err)
	}
	if ws, ok := ReadExit(r); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("exit %v %v, want killed by SIGKILL", ws, ok)
	}

	buf.Reset()
	writeReport(&buf, reportFailed, "start /x: no such file\nor directory")
	if err := ReadStart(bufio.NewReader(&buf)); err == nil || err.Error() != "start /x: no such file or directory" {
		t.Fatalf("a failed start read as %v", err)
	}
	for name, text := range map[string]string{
		"nothing":       "",
		"another word":  "exited 0\n",
		"a report long": strings.Repeat("x", 2*maxReportBytes) + "\n",
	} {
		if err := ReadStart(bufio.NewReader(strings.NewReader(text))); err == nil {
			t.Errorf("%s: read as started", name)
		}
	}
	for _, text := range []string{"", "exited\n", "exited x\n", "exited -1\n", "started\n"} {
		if ws, ok := ReadExit(bufio.NewReader(strings.NewReader(text))); ok {
			t.Errorf("%q read as exit %v", text, ws)
		}
	}
}

func TestUnderPrivateDir(t *testing.T) {
	for path, want := range map[string]bool{
		"/tmp/a": true, "/tmp/a/b": true, "/dev/shm/x": true,
		"/tmp": false, "/tmpfoo/a": false, "/var/tmp/a": false, "/": false,
	} {
		if got := underPrivateDir(path); got != want {
			t.Errorf("underPrivateDir(%q) = %v", path, got)
		}
	}
}
