package main

import (
	"flag"
	"fmt"
	"sort"

	"github.com/weft-sched/weft/internal/gossip"
	"github.com/weft-sched/weft/rpc"
)

// runKeygen prints a new gossip encryption key (`weft operator keygen`).
// With -data-dir it writes the key as the keyring of each data dir
// instead: a member started on it gossips encrypted with no -encrypt (how
// a shell-less container image gets its key).
func runKeygen(args []string) error {
	fs := newFlagSet("operator keygen")
	var dirs stringsFlag
	fs.Var(&dirs, "data-dir", "write the key as the gossip keyring of the server or agent data `DIR` instead of printing it (repeatable)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("usage: weft operator keygen [-data-dir DIR]... (takes no arguments)")
	}
	key, err := gossip.GenerateKey()
	if err != nil {
		return err
	}
	if len(dirs) == 0 {
		fmt.Fprintln(stdout, key)
		return nil
	}
	for _, d := range dirs {
		if err := gossip.SeedKeyring(d, key); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Wrote a new gossip key to %s\n", gossip.KeyringFile(d))
	}
	return nil
}

// runGossipKeyring lists, installs, uses or removes gossip keys on every
// member of the pool (`weft operator gossip keyring`).
func runGossipKeyring(args []string) error {
	const usage = "weft operator gossip keyring (-list | -install KEY | -use KEY | -remove KEY) [-address ADDR] [-json]"
	var list bool
	var install, use, remove string
	cf, _, err := clientCommand("operator gossip keyring", args, 0, usage, func(fs *flag.FlagSet) {
		fs.BoolVar(&list, "list", false, "list the keys the members hold")
		fs.StringVar(&install, "install", "", "add `KEY` to every member's keyring")
		fs.StringVar(&use, "use", "", "make `KEY` (installed) every member's primary key")
		fs.StringVar(&remove, "remove", "", "remove `KEY` (not primary) from every member's keyring")
	})
	if err != nil {
		return err
	}
	var method, key, flagName string
	n := 0
	for _, op := range []struct {
		set            bool
		method, key, f string
	}{
		{list, "Operator.KeyringList", "", "list"},
		{install != "", "Operator.KeyringInstall", install, "install"},
		{use != "", "Operator.KeyringUse", use, "use"},
		{remove != "", "Operator.KeyringRemove", remove, "remove"},
	} {
		if op.set {
			n++
			method, key, flagName = op.method, op.key, op.f
		}
	}
	if n != 1 {
		return usagef("usage: %s", usage)
	}
	if key != "" {
		if _, err := gossip.ParseKey(key); err != nil {
			return usagef("-%s: %v", flagName, err)
		}
	}
	req := rpc.KeyringRequest{RequestHeader: cf.header(), Key: key}
	var resp rpc.KeyringResponse
	if err := cf.call(method, &req, &resp); err != nil {
		return err
	}
	if cf.json {
		resp.Keys = orEmpty(resp.Keys)
		if err := printJSON(resp); err != nil {
			return err
		}
	} else if err := printKeyring(flagName, &resp); err != nil {
		return err
	}
	return keyringIncomplete(&resp)
}

func printKeyring(op string, resp *rpc.KeyringResponse) error {
	switch op {
	case "list":
		fmt.Fprintf(stdout, "Gossip keys (%d of %d members answered):\n", resp.Responses, resp.Members)
		w := table()
		fmt.Fprintln(w, "KEY\tINSTALLED\tPRIMARY")
		for _, k := range resp.Keys {
			fmt.Fprintf(w, "%s\t%d/%d\t%d/%d\n", k.Key, k.Members, resp.Responses, k.PrimaryMembers, resp.Responses)
		}
		if err := w.Flush(); err != nil {
			return err
		}
	case "install":
		fmt.Fprintf(stdout, "Installed the key on %d of %d members.\n", resp.Responses-resp.Failed, resp.Members)
	case "use":
		fmt.Fprintf(stdout, "%d of %d members now encrypt with the key.\n", resp.Responses-resp.Failed, resp.Members)
	case "remove":
		fmt.Fprintf(stdout, "Removed the key from %d of %d members.\n", resp.Responses-resp.Failed, resp.Members)
	}
	names := make([]string, 0, len(resp.Messages))
	for name := range resp.Messages {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(stderr, "  %s: %s\n", name, resp.Messages[name])
	}
	return nil
}

// keyringIncomplete is the command's error when a member failed or did
// not answer: the change then holds on some members only.
func keyringIncomplete(resp *rpc.KeyringResponse) error {
	missing := max(resp.Members-resp.Responses, 0)
	switch {
	case resp.Complete():
		return nil
	case resp.Failed > 0 && missing > 0:
		return fmt.Errorf("%d of %d members failed (see above) and %d did not answer", resp.Failed, resp.Members, missing)
	case resp.Failed > 0:
		return fmt.Errorf("%d of %d members failed (see above)", resp.Failed, resp.Members)
	}
	return fmt.Errorf("%d of %d members did not answer; run the command again once they are reachable", missing, resp.Members)
}
