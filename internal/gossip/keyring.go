package gossip

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/memberlist"
)

// KeySize is the size in bytes of a gossip encryption key (AES-256-GCM).
const KeySize = 32

// GenerateKey returns a new gossip key: KeySize bytes from crypto/rand,
// in standard base64 (`weft operator keygen`).
func GenerateKey() (string, error) {
	var k [KeySize]byte
	if _, err := rand.Read(k[:]); err != nil {
		return "", fmt.Errorf("read random bytes for a gossip key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(k[:]), nil
}

// ParseKey decodes a gossip key: the standard base64 of exactly KeySize
// bytes. Its errors never repeat the key, which is a secret.
func ParseKey(s string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("not base64; generate a key with 'weft operator keygen'")
	}
	if len(k) != KeySize {
		return nil, fmt.Errorf("decodes to %d bytes, not %d; generate a key with 'weft operator keygen'", len(k), KeySize)
	}
	return k, nil
}

// KeyringFile is where a member whose data dir is dataDir keeps its gossip
// keyring: a JSON array of base64 keys, the primary key first (the format
// serf rewrites on every keyring change).
func KeyringFile(dataDir string) string {
	return filepath.Join(dataDir, "serf", "keyring")
}

// openKeyring returns the keyring a member gossips with, or nil for
// plaintext gossip. A keyring file from an earlier run wins over the key
// given at start, since keys may have been rotated since; a key given at
// start with no keyring file yet is written to one, so rotations made from
// now on survive a restart.
func openKeyring(c Config) (*memberlist.Keyring, error) {
	var given []byte
	if c.Encrypt != "" {
		k, err := ParseKey(c.Encrypt)
		if err != nil {
			return nil, fmt.Errorf("encrypt: %w", err)
		}
		given = k
	}
	if c.DataDir == "" {
		if given == nil {
			return nil, nil
		}
		return memberlist.NewKeyring(nil, given)
	}
	path := KeyringFile(c.DataDir)
	keys, err := readKeyringFile(path)
	switch {
	case err == nil:
		if given != nil && !containsKey(keys, given) {
			c.Logger.Warn("a keyring file exists and wins over -encrypt, whose key it does not hold; rotate keys with 'weft operator gossip keyring'", "keyring_file", path)
		} else if given != nil {
			c.Logger.Info("using the keyring file; -encrypt is ignored once one exists", "keyring_file", path)
		}
		c.Logger.Info("gossip encryption on", "keys", len(keys), "keyring_file", path)
		return memberlist.NewKeyring(keys, keys[0])
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	case given == nil:
		return nil, nil
	}
	if err := writeKeyringFile(path, [][]byte{given}); err != nil {
		return nil, err
	}
	c.Logger.Info("gossip encryption on", "keys", 1, "keyring_file", path)
	return memberlist.NewKeyring(nil, given)
}

// readKeyringFile reads a keyring file; an error wrapping os.ErrNotExist
// means there is none.
func readKeyringFile(path string) ([][]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read gossip keyring: %w", err)
	}
	var encoded []string
	if err := json.Unmarshal(raw, &encoded); err != nil {
		return nil, fmt.Errorf("gossip keyring %s: not a JSON array of base64 keys: %v", path, err)
	}
	if len(encoded) == 0 {
		return nil, fmt.Errorf("gossip keyring %s holds no key; remove the file to start without gossip encryption", path)
	}
	keys := make([][]byte, len(encoded))
	for i, e := range encoded {
		k, err := ParseKey(e)
		if err != nil {
			return nil, fmt.Errorf("gossip keyring %s, key %d: %v", path, i+1, err)
		}
		keys[i] = k
	}
	return keys, nil
}

// writeKeyringFile writes keys, readable by this user only.
func writeKeyringFile(path string, keys [][]byte) error {
	encoded := make([]string, len(keys))
	for i, k := range keys {
		encoded[i] = base64.StdEncoding.EncodeToString(k)
	}
	raw, err := json.MarshalIndent(encoded, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create serf dir: %w", err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return fmt.Errorf("write gossip keyring: %w", err)
	}
	return nil
}

func containsKey(keys [][]byte, k []byte) bool {
	for _, have := range keys {
		if string(have) == string(k) {
			return true
		}
	}
	return false
}

// SeedKeyring writes key (base64) as the only key of the keyring of a
// member whose data dir is dataDir, before its first start: the member
// then gossips encrypted without being given -encrypt. It refuses to
// replace a keyring that exists (rotate those with the keyring commands).
func SeedKeyring(dataDir, key string) error {
	k, err := ParseKey(key)
	if err != nil {
		return err
	}
	path := KeyringFile(dataDir)
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("%s holds a keyring already; rotate its keys with 'weft operator gossip keyring'", path)
	}
	return writeKeyringFile(path, [][]byte{k})
}

// Keyring operations a member applies to its own keyring (Keyring.Apply).
const (
	KeyringList    = "list"
	KeyringInstall = "install"
	KeyringUse     = "use"
	KeyringRemove  = "remove"
)

// Keyring is one member's gossip keyring, as memberlist encrypts and
// decrypts with it, and its keyring file. It changes only through Apply:
// serf's own key queries, which any holder of a gossip key could send to
// every member, are refused before serf sees them (inspect.go), so the
// keyring of a pool changes only when its servers call each member's
// keyring method with a server certificate (an operator's `weft operator
// gossip keyring`, which asks operator:write). It is safe for concurrent
// use.
type Keyring struct {
	ring *memberlist.Keyring // nil: plaintext gossip
	file string              // "": no data dir, nothing written
	mu   sync.Mutex          // one change at a time, in memory and on disk
}

// Enabled reports whether the member gossips encrypted.
func (k *Keyring) Enabled() bool { return k != nil && k.ring != nil }

// Apply lists (KeyringList), installs, makes primary (KeyringUse) or
// removes the key (base64, for every operation but KeyringList) on this
// member, rewrites its keyring file after a change, and returns the keys
// it holds then, the primary one first. Installing a key held already, or
// removing one not held, changes nothing; using a key not installed, or
// removing the primary one, is refused.
func (k *Keyring) Apply(op, key string) ([]string, error) {
	if !k.Enabled() {
		return nil, errors.New("gossip encryption is off on this member")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if op != KeyringList {
		raw, err := ParseKey(key)
		if err != nil {
			return nil, fmt.Errorf("key: %w", err)
		}
		switch op {
		case KeyringInstall:
			err = k.ring.AddKey(raw)
		case KeyringUse:
			err = k.ring.UseKey(raw)
		case KeyringRemove:
			err = k.ring.RemoveKey(raw)
		default:
			return nil, fmt.Errorf("op: %q is not one of %s, %s, %s, %s", op, KeyringList, KeyringInstall, KeyringUse, KeyringRemove)
		}
		if err != nil {
			return nil, err
		}
		if k.file != "" {
			if err := writeKeyringFile(k.file, k.ring.GetKeys()); err != nil {
				return nil, err
			}
		}
	}
	keys := k.ring.GetKeys() // the primary first
	out := make([]string, len(keys))
	for i, raw := range keys {
		out[i] = base64.StdEncoding.EncodeToString(raw)
	}
	return out, nil
}
