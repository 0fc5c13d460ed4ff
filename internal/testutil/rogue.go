package testutil

import (
	"encoding/base64"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"
)

// RogueGossipMember starts a serf member on 127.0.0.1 that holds the
// pool's gossip key (base64) and nothing else of weft's: plain serf on
// memberlist's own transport, as whoever stole the key would run it, with
// tags of its choosing. It joins join (serf addresses) and is shut down
// when the test ends.
func RogueGossipMember(t testing.TB, name, key string, tags map[string]string, join ...string) *serf.Serf {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := memberlist.NewKeyring(nil, raw)
	if err != nil {
		t.Fatal(err)
	}
	ml := memberlist.DefaultLANConfig()
	ml.Name, ml.BindAddr, ml.BindPort, ml.AdvertiseAddr = name, "127.0.0.1", 0, "127.0.0.1"
	ml.Keyring, ml.GossipVerifyIncoming, ml.GossipVerifyOutgoing = ring, true, true
	ml.GossipInterval, ml.ProbeInterval, ml.ProbeTimeout = 50*time.Millisecond, 500*time.Millisecond, 250*time.Millisecond
	ml.LogOutput = io.Discard
	ml.EnableCompression = false // weft members refuse compressed gossip whatever sends it
	conf := serf.DefaultConfig()
	conf.Init()
	conf.NodeName, conf.Tags, conf.MemberlistConfig, conf.LogOutput = name, tags, ml, io.Discard
	s, err := serf.Create(conf)
	if err != nil {
		t.Fatalf("start rogue gossip member %s: %v", name, err)
	}
	t.Cleanup(func() { s.Shutdown() })
	if len(join) > 0 {
		if _, err := s.Join(join, true); err != nil {
			t.Fatalf("rogue gossip member %s joins %v: %v", name, join, err)
		}
	}
	return s
}
