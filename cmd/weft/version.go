package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// buildInfo is what `weft version -json` prints: the version stamped by
// the Makefile and what the Go toolchain recorded of the build.
type buildInfo struct {
	Version      string `json:"version"`
	GoVersion    string `json:"go_version"`
	Revision     string `json:"revision,omitempty"`
	RevisionTime string `json:"revision_time,omitempty"`
	Modified     bool   `json:"modified"`
	OS           string `json:"os"`
	Arch         string `json:"arch"`
}

// currentBuild reads the build from the binary (runtime/debug): the VCS
// settings are there when it was built inside a git checkout.
func currentBuild() buildInfo {
	b := buildInfo{Version: version, GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.RevisionTime = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the one line `weft version` prints.
func (b buildInfo) String() string {
	parts := []string{b.GoVersion, b.OS + "/" + b.Arch}
	if b.Revision != "" {
		rev := "revision " + b.Revision
		if b.RevisionTime != "" {
			rev += " of " + b.RevisionTime
		}
		if b.Modified {
			rev += " with uncommitted changes"
		}
		parts = append(parts, rev)
	}
	return fmt.Sprintf("weft %s (%s)", b.Version, strings.Join(parts, ", "))
}

func runVersion(args []string) error {
	fs := newFlagSet("version")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("weft version takes no arguments, got %q", pos[0])
	}
	b := currentBuild()
	if *asJSON {
		return printJSON(b)
	}
	fmt.Fprintln(stdout, b)
	return nil
}
