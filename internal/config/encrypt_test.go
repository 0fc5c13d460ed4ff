package config

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestEncryptMustBeA32ByteBase64Key(t *testing.T) {
	good := base64.StdEncoding.EncodeToString(make([]byte, 32))
	short := base64.StdEncoding.EncodeToString([]byte("a sixteen b key!"))
	for _, tc := range []struct {
		key, want string
	}{
		{"", ""},
		{good, ""},
		{short, "decodes to 16 bytes, not 32"},
		{"not*base64", "not base64"},
		{good[:len(good)-1], "not base64"},
	} {
		srv := DefaultServer()
		srv.DataDir, srv.Encrypt = "/d", tc.key
		if err := MergeFile(srv, "s.hcl", []byte("encrypt = \""+tc.key+"\"\n"), nil); err != nil {
			t.Fatal(err)
		}
		_, agentErr := loadAgent(t, "", "-data-dir", "d", "-join", "x", "-encrypt", tc.key)
		for name, err := range map[string]error{"server": srv.Validate(), "agent": agentErr} {
			if tc.want == "" {
				if err != nil {
					t.Errorf("%s with key %q refused: %v", name, tc.key, err)
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), "encrypt (-encrypt)") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s with key %q: got %v, want an error naming encrypt (-encrypt) with %q", name, tc.key, err, tc.want)
			} else if strings.Contains(err.Error(), tc.key) {
				t.Errorf("%s: the error repeats the key: %v", name, err)
			}
		}
	}
}
