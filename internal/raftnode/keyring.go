package raftnode

import (
	"context"
	"encoding/base64"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/weft-sched/weft/internal/gossip"
	wrpc "github.com/weft-sched/weft/rpc"
)

// The gossip keyring methods (`weft operator gossip keyring`) act on the
// gossip pool, not on Raft, so they need no leader and keys can be rotated
// while Raft has none. The answering process changes its own keyring and
// calls every other live member's keyring method (Gossip.Keyring, which
// asks a server's certificate, or a router's among routers) over mutual
// TLS: each member applies the change and rewrites its keyring file. serf's
// own key queries, which any holder of the gossip key could broadcast, are
// refused by every member (package gossip), so a pool's keys change only
// through these methods, for a caller with operator:write; and a key is
// given only to members that prove a weft certificate, never gossiped to
// whoever holds an old, leaked one, so a rotation shuts a leaked key's
// holder out.

const (
	// keyringCallTimeout bounds one member's answer.
	keyringCallTimeout = 10 * time.Second
	// keyringFanout bounds the members called at once.
	keyringFanout = 32
)

// memberKeys is one member's answer: its keys after the operation, the
// primary first, or why it has none.
type memberKeys struct {
	name     string
	keys     []string
	err      error
	answered bool // the member answered (with its keys or its error)
}

// KeyringList lists the gossip keys the members hold, and how many hold
// each and use it as their primary key.
func (e *Operator) KeyringList(ctx context.Context, args *wrpc.KeyringRequest, reply *wrpc.KeyringResponse) error {
	if err := e.checkKeyring(); err != nil {
		return err
	}
	answers := e.everyMember(ctx, gossip.KeyringList, "")
	fill(reply, answers)
	held, primary := map[string]int{}, map[string]int{}
	for _, a := range answers {
		for i, k := range a.keys {
			held[k]++
			if i == 0 {
				primary[k]++
			}
		}
	}
	for k, n := range held {
		reply.Keys = append(reply.Keys, wrpc.GossipKey{Key: k, Members: n, PrimaryMembers: primary[k]})
	}
	sort.Slice(reply.Keys, func(i, j int) bool { return reply.Keys[i].Key < reply.Keys[j].Key })
	return nil
}

// KeyringInstall adds a key to every member's keyring. Members decrypt
// with any key of their keyring but encrypt with the primary one, so a
// key is installed everywhere before it is made primary.
func (e *Operator) KeyringInstall(ctx context.Context, args *wrpc.KeyringRequest, reply *wrpc.KeyringResponse) error {
	return e.keyringChange(ctx, gossip.KeyringInstall, args, reply, "gossip key installed")
}

// KeyringUse makes an installed key every member's primary key.
func (e *Operator) KeyringUse(ctx context.Context, args *wrpc.KeyringRequest, reply *wrpc.KeyringResponse) error {
	return e.keyringChange(ctx, gossip.KeyringUse, args, reply, "gossip primary key changed")
}

// KeyringRemove removes a key from every member's keyring. It is refused
// while the key is any member's primary key.
func (e *Operator) KeyringRemove(ctx context.Context, args *wrpc.KeyringRequest, reply *wrpc.KeyringResponse) error {
	if err := e.checkKeyring(); err != nil {
		return err
	}
	key, err := canonicalKey(args.Key)
	if err != nil {
		return err
	}
	var list wrpc.KeyringResponse
	if err := e.KeyringList(ctx, &wrpc.KeyringRequest{}, &list); err != nil {
		return fmt.Errorf("list gossip keys before removing one: %w", err)
	}
	for _, k := range list.Keys {
		if k.Key == key && k.PrimaryMembers > 0 {
			return wrpc.Errorf(wrpc.CodeConflict, "key: it is the primary gossip key of %d of %d members; make another key primary first ('weft operator gossip keyring -use KEY')", k.PrimaryMembers, list.Responses)
		}
	}
	return e.keyringChange(ctx, gossip.KeyringRemove, args, reply, "gossip key removed")
}

// KeyringMember applies a keyring operation to this member's own keyring
// (Gossip.Keyring): what the process answering an operator's keyring
// command asks of every member.
func (e *Operator) KeyringMember(ctx context.Context, args *wrpc.GossipKeyringRequest, reply *wrpc.GossipKeyringResponse) error {
	return ApplyKeyring(e.Node.keyring, args, reply)
}

// ApplyKeyring answers Gossip.Keyring from keyring, on any member (agents
// register it too).
func ApplyKeyring(keyring *gossip.Keyring, args *wrpc.GossipKeyringRequest, reply *wrpc.GossipKeyringResponse) error {
	if !keyring.Enabled() {
		return wrpc.Errorf(wrpc.CodeConflict, "gossip encryption is off on this member")
	}
	keys, err := keyring.Apply(args.Op, args.Key)
	if err != nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "%v", err)
	}
	reply.Keys = keys
	return nil
}

// keyringChange checks a request naming a key and applies op with it to
// every member.
func (e *Operator) keyringChange(ctx context.Context, op string, args *wrpc.KeyringRequest, reply *wrpc.KeyringResponse, done string) error {
	if err := e.checkKeyring(); err != nil {
		return err
	}
	key, err := canonicalKey(args.Key)
	if err != nil {
		return err
	}
	fill(reply, e.everyMember(ctx, op, key))
	e.Logger.Info(done, "members", reply.Members, "answered", reply.Responses, "failed", reply.Failed)
	return nil
}

// canonicalKey checks a key and returns it in standard base64.
func canonicalKey(key string) (string, error) {
	raw, err := gossip.ParseKey(key)
	if err != nil {
		return "", wrpc.Errorf(wrpc.CodeBadRequest, "key: %v", err)
	}
	return base64.StdEncoding.EncodeToString(raw), nil
}

// checkKeyring refuses the keyring methods before gossip has started, and
// on a process that gossips in plaintext (it has no keyring to change).
func (e *Operator) checkKeyring() error {
	if e.Node.serf == nil {
		return errStarting
	}
	if !e.Node.keyring.Enabled() {
		return wrpc.Errorf(wrpc.CodeConflict, "gossip encryption is off on this %s: start every member of its gossip pool with -encrypt KEY (see docs/security.md)", e.Node.cfg.Role)
	}
	return nil
}

// everyMember applies op to this member's keyring and, with Gossip.Keyring,
// to every other live member's, keyringFanout at a time.
func (e *Operator) everyMember(ctx context.Context, op, key string) []memberKeys {
	self := e.Node.serf.LocalMember().Name
	var members []serf.Member
	for _, m := range e.Node.serf.Members() {
		if m.Status == serf.StatusAlive && m.Name != self {
			members = append(members, m)
		}
	}
	out := make([]memberKeys, len(members)+1)
	keys, err := e.Node.keyring.Apply(op, key)
	out[0] = memberKeys{name: self, keys: keys, err: err, answered: true}
	// A member is reached at the RPC address it gossips: one that gives
	// the address of a member already counted (this one's included) is
	// not called again, and counted as failed.
	at := map[string]string{e.Node.addr: self}
	sem := make(chan struct{}, keyringFanout)
	var wg sync.WaitGroup
	for i, m := range members {
		addr := m.Tags[gossip.TagRPCAddr]
		if other, dup := at[addr]; dup && addr != "" {
			out[i+1] = memberKeys{name: m.Name, err: fmt.Errorf("it gossips the RPC address of member %s (%s): not called", other, addr)}
			continue
		}
		at[addr] = m.Name
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i+1] = e.callMember(ctx, m, op, key)
		}()
	}
	wg.Wait()
	return out
}

// callMember applies op to one other member's keyring.
func (e *Operator) callMember(ctx context.Context, m serf.Member, op, key string) memberKeys {
	ctx, cancel := context.WithTimeout(ctx, keyringCallTimeout)
	defer cancel()
	var resp wrpc.GossipKeyringResponse
	err := e.CallMember(ctx, m, "Gossip.Keyring", &wrpc.GossipKeyringRequest{Op: op, Key: key}, &resp)
	if err != nil && !wrpc.IsServerError(err) {
		return memberKeys{name: m.Name, err: fmt.Errorf("unreachable over mutual TLS at its RPC address %q (not a weft member, or down): %w", m.Tags[gossip.TagRPCAddr], err)}
	}
	return memberKeys{name: m.Name, keys: resp.Keys, err: err, answered: true}
}

// fill counts the members' answers into reply.
func fill(reply *wrpc.KeyringResponse, answers []memberKeys) {
	reply.Members = len(answers)
	for _, a := range answers {
		if a.answered {
			reply.Responses++
		}
		if a.err != nil {
			if a.answered {
				reply.Failed++
			}
			if reply.Messages == nil {
				reply.Messages = map[string]string{}
			}
			reply.Messages[a.name] = a.err.Error()
		}
	}
}
