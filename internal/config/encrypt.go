package config

import (
	"encoding/base64"
	"errors"
	"fmt"
)

// gossipKeySize is the size in bytes of a gossip encryption key (SPEC §15).
const gossipKeySize = 32

// validateEncrypt checks the encrypt setting: empty (no gossip
// encryption), or the standard base64 of gossipKeySize bytes. Its errors
// never repeat the key, which is a secret.
func validateEncrypt(key string) error {
	if key == "" {
		return nil
	}
	k, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		return errors.New("encrypt (-encrypt): not base64; generate a key with 'weft operator keygen'")
	}
	if len(k) != gossipKeySize {
		return fmt.Errorf("encrypt (-encrypt): decodes to %d bytes, not %d; generate a key with 'weft operator keygen'", len(k), gossipKeySize)
	}
	return nil
}
