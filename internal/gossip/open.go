package gossip

import (
	"crypto/aes"
	"crypto/cipher"
	"errors"

	"github.com/hashicorp/memberlist"
)

// memberlist's encrypted messages (its security.go, a protocol that does
// not change): a version byte, a 12-byte nonce, then AES-GCM ciphertext
// and its 16-byte tag, sealed over authenticated data (a packet's label; a
// stream's 5-byte header and label). Version 0 pads the plaintext
// (PKCS#7); version 1 does not.
const (
	encVersionSize = 1
	encNonceSize   = 12
	encTagSize     = 16
	maxEncVersion  = 1
)

var errNoKeyOpens = errors.New("no key of the keyring opens the message")

// openMessage decrypts msg, sealed by memberlist with one of the keyring's
// keys, into a new buffer (msg is left as it is: memberlist opens it again)
// and returns the plaintext, so that the guard can inspect what an
// encrypted message carries before memberlist and serf act on it. A
// message no key opens is not the guard's to judge: memberlist drops it
// and says why.
func openMessage(keys *memberlist.Keyring, msg, ad []byte) ([]byte, error) {
	if len(msg) < encVersionSize+encNonceSize+encTagSize || msg[0] > maxEncVersion {
		return nil, errNoKeyOpens
	}
	vsn := msg[0]
	nonce := msg[encVersionSize : encVersionSize+encNonceSize]
	sealed := msg[encVersionSize+encNonceSize:]
	dst := make([]byte, 0, len(sealed))
	for _, key := range keys.GetKeys() {
		block, err := aes.NewCipher(key)
		if err != nil {
			continue
		}
		gcm, err := cipher.NewGCM(block)
		if err != nil {
			continue
		}
		plain, err := gcm.Open(dst, nonce, sealed, ad)
		if err != nil {
			continue
		}
		if vsn == 0 {
			plain = unpad(plain)
		}
		return plain, nil
	}
	return nil, errNoKeyOpens
}

// unpad strips PKCS#7 padding, leaving a message whose padding is not
// well formed as it is (memberlist would read it the same way).
func unpad(b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	n := int(b[len(b)-1])
	if n == 0 || n > len(b) {
		return b
	}
	return b[:len(b)-n]
}
