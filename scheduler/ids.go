package scheduler

import "fmt"

// MaxIDLength bounds an app, container or node ID: each may name a file,
// directory or cgroup, and file names stop at 255 bytes.
const MaxIDLength = 255

// ValidateID checks an ID that may become a path element (an app ID, a
// container ID, a node ID): 1 to MaxIDLength letters, digits, '.', '-' and
// '_', and neither "." nor "..". So it holds no path separator, no glob
// pattern and nothing that leaves the directory it is joined to. field
// names the ID in the error ("container.app_id").
func ValidateID(field, id string) error {
	if id == "" || len(id) > MaxIDLength {
		return fmt.Errorf("%s %.64q must be 1 to %d characters", field, id, MaxIDLength)
	}
	if id == "." || id == ".." {
		return fmt.Errorf("%s %q is not an ID", field, id)
	}
	for i := 0; i < len(id); i++ {
		if !idByte(id[i]) {
			return fmt.Errorf("%s %.64q: use letters, digits, '.', '-' and '_' (no path separators)", field, id)
		}
	}
	return nil
}

func idByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_'
}
