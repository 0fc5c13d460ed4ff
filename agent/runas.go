package agent

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/hashicorp/go-hclog"
)

// nobodyUser is the account containers run as when the agent runs as root
// and nothing better is allowed (SPEC §15).
const nobodyUser = "nobody"

// maxUnixUserLength bounds a Unix user name (useradd's limit).
const maxUnixUserLength = 32

// runAsPolicy is how an agent picks the Unix account of its containers:
// never root unless allowRoot; when the agent is root, the submitting
// user's account if runAsUser and it exists here, else the uid the
// servers gave the app (one per running app, within dynamicUIDs), else
// nobody (or root, with allowRoot). An agent that is not root cannot
// change user, so its containers run as its own user.
type runAsPolicy struct {
	agentIsRoot bool
	allowRoot   bool
	runAsUser   bool
	// dynamicUIDs is the range of app uids the agent runs containers as
	// (empty: none; the servers' dynamic_uid_range must lie within it).
	dynamicUIDs [2]uint32
}

// runAs is the account a container runs as.
type runAs struct {
	// name is the account's name, for logs and diagnostics; empty for the
	// agent's own user.
	name string
	// cred is what the process starts with; nil runs it as the agent's
	// own user (and groups).
	cred *syscall.Credential
	// home is the account's home directory (containers get it as HOME
	// when they change user; "" for an app's uid, which has none: the
	// container's work directory is its home).
	home string
	// why says how the account was chosen, for the log.
	why string
}

// lookupFunc finds a Unix account by name, as os/user.Lookup does.
type lookupFunc func(name string) (*user.User, error)

// hasDynamicUID reports whether uid is one of the policy's app uids.
func (p runAsPolicy) hasDynamicUID(uid uint32) bool {
	return p.dynamicUIDs[0] != 0 && uid >= p.dynamicUIDs[0] && uid <= p.dynamicUIDs[1]
}

// decide picks the account a container of requested (the app's user)
// whose app has uid (0: none) runs as. It fails only when the container
// must not run at all: the agent is root, root is not allowed, and
// neither the app's uid nor nobody can be used. It is a pure function of
// its inputs: lookup is called only with names that are valid Unix user
// names.
func (p runAsPolicy) decide(requested string, uid uint32, lookup lookupFunc) (runAs, error) {
	if !p.agentIsRoot {
		return runAs{why: "the agent is not root"}, nil
	}
	fallback := "run_as_user is off"
	if p.runAsUser {
		switch cred, home, err := lookupAccount(requested, lookup); {
		case err != nil:
			fallback = err.Error()
		case cred.Uid == 0 && !p.allowRoot:
			fallback = fmt.Sprintf("user %q has uid 0 and allow_root is off", requested)
		case cred.Uid == 0:
			return runAs{name: requested, why: "run_as_user and allow_root are on"}, nil
		default:
			return runAs{name: requested, cred: cred, home: home, why: "run_as_user is on"}, nil
		}
	}
	if p.allowRoot {
		return runAs{name: "root", why: fallback + "; allow_root is on"}, nil
	}
	switch {
	case p.hasDynamicUID(uid):
		// The app's own uid, and a group of the same number: no account
		// of this host, and no other running app's containers, has it.
		return runAs{name: fmt.Sprintf("uid %d", uid), cred: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}},
			why: fallback + "; the servers gave the app this uid"}, nil
	case uid != 0:
		fallback += fmt.Sprintf("; the app's uid %d is outside this agent's dynamic_uid_range %d-%d", uid, p.dynamicUIDs[0], p.dynamicUIDs[1])
	default:
		fallback += "; the app has no uid (the servers' dynamic_uid_range is off)"
	}
	nobody, home, err := lookupAccount(nobodyUser, lookup)
	if err != nil {
		return runAs{}, fmt.Errorf("containers may not run as root (allow_root is off) and the fallback account cannot be used: %w; create user %s or set allow_root = true", err, nobodyUser)
	}
	if nobody.Uid == 0 {
		return runAs{}, fmt.Errorf("user %s has uid 0 on this host; containers may not run as root (allow_root is off)", nobodyUser)
	}
	return runAs{name: nobodyUser, cred: nobody, home: home, why: fallback}, nil
}

// lookupAccount validates name as a Unix user name, looks it up, and
// returns credentials for its uid and primary gid with no supplementary
// groups, and its home directory.
func lookupAccount(name string, lookup lookupFunc) (*syscall.Credential, string, error) {
	if err := validateUnixUser(name); err != nil {
		return nil, "", err
	}
	u, err := lookup(name)
	var unknown user.UnknownUserError
	switch {
	case errors.As(err, &unknown):
		return nil, "", fmt.Errorf("user %q has no account on this host", name)
	case err != nil:
		return nil, "", fmt.Errorf("look up user %q: %w", name, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, "", fmt.Errorf("user %q: uid %q is not a number", name, u.Uid)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, "", fmt.Errorf("user %q: gid %q is not a number", name, u.Gid)
	}
	// An empty (not nil) Groups clears the agent's supplementary groups.
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, u.HomeDir, nil
}

// validateUnixUser checks a portable Unix user name: a lower-case letter
// or '_', then lower-case letters, digits, '_' and '-', optionally ending
// in '$', at most 32 characters.
func validateUnixUser(name string) error {
	if name == "" {
		return errors.New("the app has no user")
	}
	ok := len(name) <= maxUnixUserLength && lowerOrUnderscore(name[0])
	for i := 1; ok && i < len(name); i++ {
		c := name[i]
		ok = lowerOrUnderscore(c) || c >= '0' && c <= '9' || c == '-' || c == '$' && i == len(name)-1
	}
	if !ok {
		return fmt.Errorf("user %.40q is not a Unix user name ([a-z_][a-z0-9_-]*[$]?, at most %d characters)", name, maxUnixUserLength)
	}
	return nil
}

func lowerOrUnderscore(c byte) bool { return c >= 'a' && c <= 'z' || c == '_' }

// describe says, once at start, which account containers run as.
func (p runAsPolicy) describe() string {
	apps := nobodyUser + " (dynamic_uid_range is off)"
	if p.dynamicUIDs[0] != 0 {
		apps = fmt.Sprintf("the uid the servers gave their app (from %d-%d; one per running app)", p.dynamicUIDs[0], p.dynamicUIDs[1])
	}
	switch {
	case !p.agentIsRoot && (p.allowRoot || p.runAsUser):
		return "containers run as the agent's own user: the agent is not root, so allow_root and run_as_user have no effect"
	case !p.agentIsRoot:
		return "containers run as the agent's own user: the agent is not root"
	case p.runAsUser && p.allowRoot:
		return "containers run as their submitting user's account where it exists here, else as root (allow_root is on)"
	case p.runAsUser:
		return "containers run as their submitting user's account where it exists here (never root), else as " + apps
	case p.allowRoot:
		return "containers run as root (allow_root is on): nothing keeps tenants' containers apart"
	default:
		return "containers run as " + apps
	}
}

// checkContainerUsers says once, at start, which account containers run
// as, and refuses to start an agent whose containers would run as another
// user who cannot reach their directories (under containersDir) or the
// weft executable AM containers run. It warns when the fallback account
// is missing: every container would then be refused.
func checkContainerUsers(p runAsPolicy, lookup lookupFunc, containersDir, executable string, logger hclog.Logger) error {
	logger.Info(p.describe())
	if !p.agentIsRoot || p.allowRoot && !p.runAsUser {
		return nil
	}
	if !p.allowRoot {
		if _, _, err := lookupAccount(nobodyUser, lookup); err != nil {
			logger.Warn("containers will be refused: they may not run as root and the fallback account cannot be used",
				"error", err, "fix", "create user "+nobodyUser+" or set allow_root = true")
		}
	}
	for _, need := range []struct{ what, path string }{
		{"the containers directory", containersDir},
		{"the weft executable AM containers run", executable},
	} {
		if err := reachableByOthers(need.path); err != nil {
			return fmt.Errorf("%s, but %s is out of their reach: %w; "+
				"make it and its parent directories searchable by others (chmod o+x), or set allow_root = true", p.describe(), need.what, err)
		}
	}
	return nil
}

// reachableByOthers checks that every directory on the way to path lets
// any user through (o+x) and that path itself is o+x: what an account
// with no group in common with the agent needs to enter a directory or
// run a program.
func reachableByOthers(path string) error {
	path, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	for p := path; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s has mode %s", p, fi.Mode())
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}
