package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/weft-sched/weft/rpc"
)

// Credentials reach a container as files, never in its environment: a
// process's environment is readable through /proc by anyone who may trace
// it, and by everything the container starts. Each container's secrets
// (its AM token, for an AM; what its AM handed it, such as the AM token a
// reduce task fetches map output with) are files in
// <container dir>/secrets/, a directory of the container's account (mode
// 0500) holding files only it may read (0400); WEFT_SECRETS_DIR names it.
// The directory goes when the container ends.

// secretsDir is a container directory's secrets directory.
const secretsDir = "secrets"

// Bounds of a launch's secrets: what an agent holds for a container.
const (
	maxSecrets     = 16
	maxSecretBytes = 16 << 10
	maxSecretName  = 64
)

// validateSecrets checks a launch's secrets: at most maxSecrets, each
// named [a-z0-9][a-z0-9._-]* (at most maxSecretName characters) and at most
// maxSecretBytes long. The error names the field.
func validateSecrets(secrets map[string]string) error {
	if len(secrets) > maxSecrets {
		return fmt.Errorf("launch.secrets: %d secrets; at most %d", len(secrets), maxSecrets)
	}
	for name, v := range secrets {
		if !validSecretName(name) {
			return fmt.Errorf("launch.secrets: name %.70q: use at most %d lower-case letters, digits, '.', '-' and '_', beginning with a letter or digit", name, maxSecretName)
		}
		if len(v) > maxSecretBytes {
			return fmt.Errorf("launch.secrets.%s: %d bytes; at most %d", name, len(v), maxSecretBytes)
		}
	}
	return nil
}

func validSecretName(name string) bool {
	if name == "" || len(name) > maxSecretName {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '-' || c == '_'):
		default:
			return false
		}
	}
	return true
}

// writeSecrets writes secrets into dir/secrets, readable only by cred's
// account (the agent's when cred is nil), and returns the directory ("" when
// there are none). Names were checked with validateSecrets.
func writeSecrets(dir string, secrets map[string]string, cred *syscall.Credential) (string, error) {
	if len(secrets) == 0 {
		return "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	sd := filepath.Join(dir, secretsDir)
	if err := os.Mkdir(sd, 0o700); err != nil && !os.IsExist(err) {
		return "", err
	}
	if fi, err := os.Lstat(sd); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", sd)
	}
	for name, v := range secrets {
		if !validSecretName(name) {
			return "", fmt.Errorf("secret name %q", name)
		}
		path := filepath.Join(sd, name)
		f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|syscall.O_NOFOLLOW, 0o400)
		if err != nil {
			return "", err
		}
		_, err = f.WriteString(v)
		if err == nil && cred != nil {
			err = f.Chown(int(cred.Uid), int(cred.Gid))
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", fmt.Errorf("write secret %s: %w", name, err)
		}
	}
	if cred != nil {
		if err := os.Lchown(sd, int(cred.Uid), int(cred.Gid)); err != nil {
			return "", err
		}
	}
	return sd, os.Chmod(sd, 0o500)
}

// dropSecrets removes a container's secrets once it has ended: nothing
// reads them any more, and a later app may be given the same uid.
func dropSecrets(dir string) {
	os.RemoveAll(filepath.Join(dir, secretsDir))
}

// envSecretsDir is set to the secrets directory in a container that has
// secrets.
const envSecretsDir = rpc.EnvSecretsDir
