package server

import (
	"context"
	"encoding/base64"
	"fmt"
	"sort"

	"github.com/hashicorp/serf/serf"
	"github.com/weft-sched/weft/internal/gossip"
	wrpc "github.com/weft-sched/weft/rpc"
)

// The gossip keyring methods (SPEC §15, `weft operator gossip keyring`)
// act on the gossip pool, not on Raft: the answering server broadcasts the
// change with serf to every member, servers and agents alike, each of
// which applies it to its keyring and rewrites its keyring file. They need
// no leader, so keys can be rotated while Raft has none.

// KeyringList lists the gossip keys the members hold, and how many hold
// each and use it as their primary key.
func (e *Operator) KeyringList(ctx context.Context, args *wrpc.KeyringRequest, reply *wrpc.KeyringResponse) error {
	km, err := e.srv.keyManager()
	if err != nil {
		return err
	}
	resp, err := km.ListKeys()
	return keyringAnswer(resp, err, reply)
}

// KeyringInstall adds a key to every member's keyring. Members decrypt
// with any key of their keyring but encrypt with the primary one, so a
// key is installed everywhere before it is made primary.
func (e *Operator) KeyringInstall(ctx context.Context, args *wrpc.KeyringRequest, reply *wrpc.KeyringResponse) error {
	key, km, err := e.keyringChange(args)
	if err != nil {
		return err
	}
	resp, err := km.InstallKey(key)
	if err := keyringAnswer(resp, err, reply); err != nil {
		return err
	}
	e.srv.logger.Info("gossip key installed", "members", reply.Members, "answered", reply.Responses, "failed", reply.Failed)
	return nil
}

// KeyringUse makes an installed key every member's primary key.
func (e *Operator) KeyringUse(ctx context.Context, args *wrpc.KeyringRequest, reply *wrpc.KeyringResponse) error {
	key, km, err := e.keyringChange(args)
	if err != nil {
		return err
	}
	resp, err := km.UseKey(key)
	if err := keyringAnswer(resp, err, reply); err != nil {
		return err
	}
	e.srv.logger.Info("gossip primary key changed", "members", reply.Members, "answered", reply.Responses, "failed", reply.Failed)
	return nil
}

// KeyringRemove removes a key from every member's keyring. It is refused
// while the key is any member's primary key.
func (e *Operator) KeyringRemove(ctx context.Context, args *wrpc.KeyringRequest, reply *wrpc.KeyringResponse) error {
	key, km, err := e.keyringChange(args)
	if err != nil {
		return err
	}
	list, err := km.ListKeys()
	if list == nil || list.NumNodes == 0 && err != nil {
		return fmt.Errorf("list gossip keys before removing one: %w", err)
	}
	if n := list.PrimaryKeys[key]; n > 0 {
		return wrpc.Errorf(wrpc.CodeConflict, "key: it is the primary gossip key of %d of %d members; make another key primary first ('weft operator gossip keyring -use KEY')", n, list.NumNodes)
	}
	resp, err := km.RemoveKey(key)
	if err := keyringAnswer(resp, err, reply); err != nil {
		return err
	}
	e.srv.logger.Info("gossip key removed", "members", reply.Members, "answered", reply.Responses, "failed", reply.Failed)
	return nil
}

// keyringChange checks a request naming a key and returns the key in the
// canonical base64 serf compares keys in.
func (e *Operator) keyringChange(args *wrpc.KeyringRequest) (string, *serf.KeyManager, error) {
	raw, err := gossip.ParseKey(args.Key)
	if err != nil {
		return "", nil, wrpc.Errorf(wrpc.CodeBadRequest, "key: %v", err)
	}
	km, err := e.srv.keyManager()
	if err != nil {
		return "", nil, err
	}
	return base64.StdEncoding.EncodeToString(raw), km, nil
}

// keyManager returns serf's key manager, or a conflict error when this
// server gossips in plaintext and so has no keyring to change.
func (s *Server) keyManager() (*serf.KeyManager, error) {
	if !s.serf.EncryptionEnabled() {
		return nil, wrpc.Errorf(wrpc.CodeConflict, "gossip encryption is off on this server: start every server and agent with -encrypt KEY (see docs/security.md)")
	}
	return s.serf.KeyManager(), nil
}

// keyringAnswer fills reply from serf's answer. serf's error reports
// members that failed or did not answer, which the reply names; only a
// broadcast that reached nobody is an error of the call.
func keyringAnswer(resp *serf.KeyResponse, err error, reply *wrpc.KeyringResponse) error {
	if resp == nil || resp.NumNodes == 0 && err != nil {
		return wrpc.Errorf(wrpc.CodeUnavailable, "gossip keyring broadcast: %v", err)
	}
	reply.Members, reply.Responses, reply.Failed = resp.NumNodes, resp.NumResp, resp.NumErr
	if len(resp.Messages) > 0 {
		reply.Messages = resp.Messages
	}
	for k, n := range resp.Keys {
		reply.Keys = append(reply.Keys, wrpc.GossipKey{Key: k, Members: n, PrimaryMembers: resp.PrimaryKeys[k]})
	}
	sort.Slice(reply.Keys, func(i, j int) bool { return reply.Keys[i].Key < reply.Keys[j].Key })
	return nil
}
