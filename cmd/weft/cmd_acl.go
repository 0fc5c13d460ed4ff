package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/weft-sched/weft/acl"
	"github.com/weft-sched/weft/rpc"
)

func runACL(args []string) error {
	return subcommand("acl", args, map[string]func([]string) error{
		"bootstrap": runACLBootstrap,
		"token":     runACLToken,
		"policy":    runACLPolicy,
	})
}

func runACLToken(args []string) error {
	return subcommand("acl token", args, map[string]func([]string) error{
		"create": runACLTokenCreate,
		"list":   runACLTokenList,
		"info":   runACLTokenInfo,
		"self":   runACLTokenSelf,
		"delete": runACLTokenDelete,
	})
}

func runACLPolicy(args []string) error {
	return subcommand("acl policy", args, map[string]func([]string) error{
		"apply":  runACLPolicyApply,
		"list":   runACLPolicyList,
		"info":   runACLPolicyInfo,
		"delete": runACLPolicyDelete,
	})
}

func runACLBootstrap(args []string) error {
	cf, _, err := clientCommand("acl bootstrap", args, 0, "weft acl bootstrap [-address ADDR] [-json]", nil)
	if err != nil {
		return err
	}
	req := &rpc.ACLBootstrapRequest{}
	req.AccessorID, req.SecretID = rpc.NewACLIDs()
	var resp rpc.ACLTokenResponse
	if err := cf.call("ACL.Bootstrap", req, &resp); err != nil {
		return err
	}
	if cf.json {
		return printJSON(resp.Token)
	}
	printToken(resp.Token)
	fmt.Fprintln(stdout, "\nThis is the only time the secret is shown: keep it safe, and use it with -token or WEFT_TOKEN.")
	return nil
}

func runACLTokenCreate(args []string) error {
	var name, typ string
	var ttl time.Duration
	var policies commaList
	cf, _, err := clientCommand("acl token create", args, 0,
		"weft acl token create -name NAME [-policy P]... [-type client|management] [-ttl DURATION] [-json]", func(fs *flag.FlagSet) {
			fs.StringVar(&name, "name", "", "who the token belongs to; with ACLs on, the user its apps run as (required)")
			fs.StringVar(&typ, "type", "client", "client (what its policies grant) or management (everything)")
			fs.Var(&policies, "policy", "policy `NAME` the token grants (repeatable; required for client tokens)")
			fs.DurationVar(&ttl, "ttl", 0, "expire the token this long after it is created (0 never)")
		})
	if err != nil {
		return err
	}
	switch {
	case name == "":
		return usagef("-name is required: who the token belongs to")
	case typ != "client" && typ != "management":
		return usagef("-type %q: use client or management", typ)
	case typ == "client" && len(policies) == 0:
		return usagef("-policy is required for a client token: name the policies it grants")
	case ttl < 0:
		return usagef("-ttl %s: must not be negative", ttl)
	}
	req := &rpc.ACLTokenCreateRequest{Name: name, Type: typ, Policies: policies, TTL: rpc.Duration(ttl)}
	req.AccessorID, req.SecretID = rpc.NewACLIDs()
	var resp rpc.ACLTokenResponse
	if err := cf.call("ACL.TokenCreate", req, &resp); err != nil {
		return err
	}
	if cf.json {
		return printJSON(resp.Token)
	}
	printToken(resp.Token)
	return nil
}

func runACLTokenList(args []string) error {
	cf, _, err := clientCommand("acl token list", args, 0, "weft acl token list [-json] [-stale]", nil)
	if err != nil {
		return err
	}
	h := cf.header()
	var resp rpc.ACLTokenListResponse
	if err := cf.call("ACL.TokenList", &h, &resp); err != nil {
		return err
	}
	if cf.json {
		return printJSON(orEmpty(resp.Tokens))
	}
	w := table()
	fmt.Fprintln(w, "ACCESSOR ID\tNAME\tTYPE\tPOLICIES\tEXPIRES")
	for _, t := range resp.Tokens {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", t.AccessorID, t.Name, t.Type, dash(strings.Join(t.Policies, ",")), expiry(t.ExpiresAt))
	}
	w.Flush()
	printStaleNote(cf, &resp.ResponseMeta)
	return nil
}

func runACLTokenInfo(args []string) error {
	cf, pos, err := clientCommand("acl token info", args, 1, "weft acl token info ACCESSOR_ID [-json]", nil)
	if err != nil {
		return err
	}
	req := &rpc.ACLTokenRequest{RequestHeader: cf.header(), AccessorID: pos[0]}
	var resp rpc.ACLTokenResponse
	if err := cf.call("ACL.TokenInfo", req, &resp); err != nil {
		return err
	}
	if cf.json {
		return printJSON(resp.Token)
	}
	printToken(resp.Token)
	return nil
}

func runACLTokenSelf(args []string) error {
	cf, _, err := clientCommand("acl token self", args, 0, "weft acl token self [-token SECRET] [-json]", nil)
	if err != nil {
		return err
	}
	h := cf.header()
	var resp rpc.ACLTokenResponse
	if err := cf.call("ACL.TokenSelf", &h, &resp); err != nil {
		return err
	}
	if cf.json {
		return printJSON(resp.Token)
	}
	printToken(resp.Token)
	return nil
}

func runACLTokenDelete(args []string) error {
	cf, pos, err := clientCommand("acl token delete", args, 1, "weft acl token delete ACCESSOR_ID", nil)
	if err != nil {
		return err
	}
	var resp rpc.WriteResponse
	if err := cf.call("ACL.TokenDelete", &rpc.ACLTokenRequest{AccessorID: pos[0]}, &resp); err != nil {
		return err
	}
	if cf.json {
		return printJSON(resp)
	}
	fmt.Fprintf(stdout, "Deleted token %s at index %d\n", pos[0], resp.Index)
	return nil
}

func runACLPolicyApply(args []string) error {
	var description string
	cf, pos, err := clientCommand("acl policy apply", args, 2, "weft acl policy apply [-description TEXT] NAME FILE (HCL; - reads stdin)", func(fs *flag.FlagSet) {
		fs.StringVar(&description, "description", "", "what the policy is for")
	})
	if err != nil {
		return err
	}
	name, file := pos[0], pos[1]
	var src []byte
	if file == "-" {
		src, err = io.ReadAll(io.LimitReader(os.Stdin, acl.MaxPolicySize+1))
	} else {
		src, err = os.ReadFile(file)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	if _, err := acl.ParseRules(file, src); err != nil {
		return fmt.Errorf("%v; nothing was changed", err)
	}
	req := &rpc.ACLPolicyApplyRequest{Policy: rpc.ACLPolicy{Name: name, Description: description, Rules: string(src)}}
	var resp rpc.WriteResponse
	if err := cf.call("ACL.PolicyApply", req, &resp); err != nil {
		return fmt.Errorf("%v; nothing was changed", err)
	}
	if cf.json {
		return printJSON(resp)
	}
	fmt.Fprintf(stdout, "Applied policy %s from %s at index %d\n", name, file, resp.Index)
	return nil
}

func runACLPolicyList(args []string) error {
	cf, _, err := clientCommand("acl policy list", args, 0, "weft acl policy list [-json] [-stale]", nil)
	if err != nil {
		return err
	}
	h := cf.header()
	var resp rpc.ACLPolicyListResponse
	if err := cf.call("ACL.PolicyList", &h, &resp); err != nil {
		return err
	}
	if cf.json {
		return printJSON(orEmpty(resp.Policies))
	}
	w := table()
	fmt.Fprintln(w, "NAME\tDESCRIPTION\tMODIFY INDEX")
	for _, p := range resp.Policies {
		fmt.Fprintf(w, "%s\t%s\t%d\n", p.Name, dash(p.Description), p.ModifyIndex)
	}
	w.Flush()
	printStaleNote(cf, &resp.ResponseMeta)
	return nil
}

func runACLPolicyInfo(args []string) error {
	cf, pos, err := clientCommand("acl policy info", args, 1, "weft acl policy info NAME [-json]", nil)
	if err != nil {
		return err
	}
	var resp rpc.ACLPolicyResponse
	if err := cf.call("ACL.PolicyInfo", &rpc.ACLPolicyRequest{RequestHeader: cf.header(), Name: pos[0]}, &resp); err != nil {
		return err
	}
	if cf.json {
		return printJSON(resp.Policy)
	}
	p := resp.Policy
	fmt.Fprintf(stdout, "Name         = %s\nDescription  = %s\nCreate Index = %d\nModify Index = %d\nRules:\n\n%s\n",
		p.Name, dash(p.Description), p.CreateIndex, p.ModifyIndex, strings.TrimRight(p.Rules, "\n"))
	return nil
}

func runACLPolicyDelete(args []string) error {
	cf, pos, err := clientCommand("acl policy delete", args, 1, "weft acl policy delete NAME", nil)
	if err != nil {
		return err
	}
	var resp rpc.WriteResponse
	if err := cf.call("ACL.PolicyDelete", &rpc.ACLPolicyRequest{Name: pos[0]}, &resp); err != nil {
		return err
	}
	if cf.json {
		return printJSON(resp)
	}
	fmt.Fprintf(stdout, "Deleted policy %s at index %d\n", pos[0], resp.Index)
	return nil
}

func printToken(t rpc.ACLToken) {
	fmt.Fprintf(stdout, "Accessor ID  = %s\n", t.AccessorID)
	if t.SecretID != "" {
		fmt.Fprintf(stdout, "Secret ID    = %s\n", t.SecretID)
	}
	fmt.Fprintf(stdout, "Name         = %s\nType         = %s\nPolicies     = %s\nExpires      = %s\nCreate Time  = %s\nCreate Index = %d\nModify Index = %d\n",
		t.Name, t.Type, dash(strings.Join(t.Policies, ", ")), expiry(t.ExpiresAt),
		time.Unix(0, t.CreateTime).UTC().Format(time.RFC3339), t.CreateIndex, t.ModifyIndex)
}

func expiry(at int64) string {
	if at == 0 {
		return "never"
	}
	return time.Unix(0, at).UTC().Format(time.RFC3339)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
