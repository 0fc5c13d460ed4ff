package agent

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// fakeAccounts is a host's user database for decide.
func fakeAccounts(t *testing.T, accounts map[string]user.User) (lookupFunc, *[]string) {
	var asked []string
	return func(name string) (*user.User, error) {
		asked = append(asked, name)
		u, ok := accounts[name]
		if !ok {
			return nil, user.UnknownUserError(name)
		}
		u.Username = name
		return &u, nil
	}, &asked
}

func TestRunAsPolicyPicksTheContainersAccount(t *testing.T) {
	host := map[string]user.User{
		"nobody": {Uid: "65534", Gid: "65534", HomeDir: "/nonexistent"},
		"alice":  {Uid: "1001", Gid: "100", HomeDir: "/home/alice"},
		"root":   {Uid: "0", Gid: "0", HomeDir: "/root"},
		"toor":   {Uid: "0", Gid: "0", HomeDir: "/root"},
		"win":    {Uid: "S-1-5-21", Gid: "100"},
	}
	noNobody := map[string]user.User{"alice": host["alice"]}
	const own = -1 // the agent's own user: no credential
	for _, tc := range []struct {
		name                      string
		root, allowRoot, runAsUse bool
		user                      string
		uid                       uint32 // the app's, from the servers
		dynamic                   bool   // the agent's dynamic_uid_range is 70000-79999
		host                      map[string]user.User
		wantUID, wantGID          int
		wantName                  string
		wantErr                   string
		neverAsked                string
	}{
		{name: "agent not root runs as itself", user: "alice", host: host, wantUID: own},
		{name: "agent not root ignores both settings", allowRoot: true, runAsUse: true, user: "alice", host: host, wantUID: own},
		{name: "agent not root without nobody", user: "alice", host: noNobody, wantUID: own},
		{name: "root agent: nobody by default", root: true, user: "alice", host: host, wantUID: 65534, wantGID: 65534, wantName: "nobody"},
		{name: "root agent without nobody refuses", root: true, user: "alice", host: noNobody, wantErr: "create user nobody or set allow_root = true"},
		{name: "root agent, nobody is uid 0", root: true, user: "alice", host: map[string]user.User{"nobody": host["root"]}, wantErr: "uid 0"},
		{name: "allow_root runs as root", root: true, allowRoot: true, user: "alice", host: host, wantUID: own, wantName: "root"},
		{name: "allow_root needs no nobody", root: true, allowRoot: true, user: "alice", host: noNobody, wantUID: own, wantName: "root"},
		{name: "run_as_user: the user's account", root: true, runAsUse: true, user: "alice", host: host, wantUID: 1001, wantGID: 100, wantName: "alice"},
		{name: "run_as_user: no account, nobody", root: true, runAsUse: true, user: "bob", host: host, wantUID: 65534, wantGID: 65534, wantName: "nobody"},
		{name: "run_as_user: no account and no nobody", root: true, runAsUse: true, user: "bob", host: noNobody, wantErr: "create user nobody"},
		{name: "run_as_user: root is never used without allow_root", root: true, runAsUse: true, user: "root", host: host, wantUID: 65534, wantGID: 65534, wantName: "nobody"},
		{name: "run_as_user: uid 0 under another name neither", root: true, runAsUse: true, user: "toor", host: host, wantUID: 65534, wantGID: 65534, wantName: "nobody"},
		{name: "run_as_user and allow_root: root may be used", root: true, runAsUse: true, allowRoot: true, user: "root", host: host, wantUID: own, wantName: "root"},
		{name: "run_as_user and allow_root: no account, root", root: true, runAsUse: true, allowRoot: true, user: "bob", host: host, wantUID: own, wantName: "root"},
		{name: "run_as_user and allow_root: the user's account first", root: true, runAsUse: true, allowRoot: true, user: "alice", host: host, wantUID: 1001, wantGID: 100, wantName: "alice"},
		{name: "run_as_user: a path is not looked up", root: true, runAsUse: true, user: "../../etc/x", host: host, wantUID: 65534, wantGID: 65534, wantName: "nobody", neverAsked: "../../etc/x"},
		{name: "run_as_user: an e-mail is not looked up", root: true, runAsUse: true, user: "alice@example.com", host: host, wantUID: 65534, wantGID: 65534, wantName: "nobody", neverAsked: "alice@example.com"},
		{name: "run_as_user: upper case is not looked up", root: true, runAsUse: true, user: "Alice", host: host, wantUID: 65534, wantGID: 65534, wantName: "nobody", neverAsked: "Alice"},
		{name: "run_as_user: empty user", root: true, runAsUse: true, user: "", host: host, wantUID: 65534, wantGID: 65534, wantName: "nobody", neverAsked: ""},
		{name: "run_as_user: a non-numeric uid is not used", root: true, runAsUse: true, user: "win", host: host, wantUID: 65534, wantGID: 65534, wantName: "nobody"},
		{name: "run_as_user off: the user is not looked up", root: true, user: "alice", host: host, wantUID: 65534, wantGID: 65534, wantName: "nobody", neverAsked: "alice"},
		{name: "the app's uid", root: true, dynamic: true, uid: 70007, user: "alice", host: host, wantUID: 70007, wantGID: 70007, wantName: "uid 70007", neverAsked: "alice"},
		{name: "the app's uid needs no nobody", root: true, dynamic: true, uid: 70007, user: "bob", host: noNobody, wantUID: 70007, wantGID: 70007, wantName: "uid 70007"},
		{name: "run_as_user: the user's account over the app's uid", root: true, runAsUse: true, dynamic: true, uid: 70007, user: "alice", host: host, wantUID: 1001, wantGID: 100, wantName: "alice"},
		{name: "run_as_user: no account, the app's uid", root: true, runAsUse: true, dynamic: true, uid: 70007, user: "bob", host: host, wantUID: 70007, wantGID: 70007, wantName: "uid 70007"},
		{name: "a uid outside the agent's range: nobody", root: true, dynamic: true, uid: 1001, user: "bob", host: host, wantUID: 65534, wantGID: 65534, wantName: "nobody"},
		{name: "uid 0 is never an app's", root: true, dynamic: true, uid: 0, user: "bob", host: host, wantUID: 65534, wantGID: 65534, wantName: "nobody"},
		{name: "no range: the app's uid is not used", root: true, uid: 70007, user: "bob", host: host, wantUID: 65534, wantGID: 65534, wantName: "nobody"},
		{name: "allow_root wins over the app's uid", root: true, allowRoot: true, dynamic: true, uid: 70007, user: "bob", host: host, wantUID: own, wantName: "root"},
		{name: "agent not root: the app's uid has no effect", dynamic: true, uid: 70007, user: "bob", host: host, wantUID: own},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lookup, asked := fakeAccounts(t, tc.host)
			p := runAsPolicy{agentIsRoot: tc.root, allowRoot: tc.allowRoot, runAsUser: tc.runAsUse}
			if tc.dynamic {
				p.dynamicUIDs = [2]uint32{70000, 79999}
			}
			got, err := p.decide(tc.user, tc.uid, lookup)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("decide = %+v, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range *asked {
				if name == tc.neverAsked && tc.neverAsked != "" || name == "" {
					t.Fatalf("looked up %q", name)
				}
			}
			if got.name != tc.wantName {
				t.Errorf("account %q, want %q", got.name, tc.wantName)
			}
			if tc.wantUID == own {
				if got.cred != nil {
					t.Fatalf("credential %+v, want the agent's own user", got.cred)
				}
				return
			}
			if got.cred == nil {
				t.Fatalf("no credential, want uid %d", tc.wantUID)
			}
			if int(got.cred.Uid) != tc.wantUID || int(got.cred.Gid) != tc.wantGID {
				t.Errorf("uid %d gid %d, want %d %d", got.cred.Uid, got.cred.Gid, tc.wantUID, tc.wantGID)
			}
			if got.cred.Groups == nil || len(got.cred.Groups) != 0 || got.cred.NoSetGroups {
				t.Errorf("supplementary groups %v (NoSetGroups %v): want them cleared", got.cred.Groups, got.cred.NoSetGroups)
			}
			if got.home != tc.host[tc.wantName].HomeDir { // "" for an app's uid: its work directory is its home
				t.Errorf("home %q, want %q", got.home, tc.host[tc.wantName].HomeDir)
			}
		})
	}
}

func TestRunAsPolicyPassesLookupFailuresOn(t *testing.T) {
	broken := func(name string) (*user.User, error) { return nil, errors.New("nss down") }
	if _, err := (runAsPolicy{agentIsRoot: true}).decide("alice", 0, broken); err == nil || !strings.Contains(err.Error(), "nss down") {
		t.Fatalf("decide with a broken user database = %v", err)
	}
}

func TestValidateUnixUser(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"alice", true}, {"_svc", true}, {"build-bot_2", true}, {"machine$", true}, {strings.Repeat("a", 32), true},
		{"", false}, {"Alice", false}, {"1alice", false}, {"-alice", false}, {"al$ice", false}, {"a/b", false},
		{"..", false}, {"alice smith", false}, {"alice@example.com", false}, {strings.Repeat("a", 33), false},
	} {
		if err := validateUnixUser(tc.name); (err == nil) != tc.ok {
			t.Errorf("validateUnixUser(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestReachableByOthers(t *testing.T) {
	open := filepath.Join(reachableTempDir(t), "a", "b")
	if err := os.MkdirAll(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := reachableByOthers(open); err != nil {
		t.Fatalf("a 0755 path: %v", err)
	}
	if err := os.Chmod(filepath.Dir(open), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := reachableByOthers(open); err == nil || !strings.Contains(err.Error(), filepath.Dir(open)+" has mode") {
		t.Fatalf("a path through a 0750 directory: %v", err)
	}
}

func TestAStartRefusedWhenContainersCannotReachTheirDirectories(t *testing.T) {
	private := t.TempDir() // 0700 parents
	if err := os.Mkdir(filepath.Join(private, "containers"), 0o755); err != nil {
		t.Fatal(err)
	}
	lookup, _ := fakeAccounts(t, map[string]user.User{"nobody": {Uid: "65534", Gid: "65534"}})
	exe, _ := os.Executable()
	err := checkContainerUsers(runAsPolicy{agentIsRoot: true}, lookup, filepath.Join(private, "containers"), exe, hclog.NewNullLogger())
	if err == nil || !strings.Contains(err.Error(), "the containers directory is out of their reach") || !strings.Contains(err.Error(), "has mode") {
		t.Fatalf("checkContainerUsers with a private data dir = %v", err)
	}
	// The agent's own user needs nothing: it made the directories.
	if err := checkContainerUsers(runAsPolicy{agentIsRoot: false}, lookup, filepath.Join(private, "containers"), exe, hclog.NewNullLogger()); err != nil {
		t.Fatal(err)
	}
	if err := checkContainerUsers(runAsPolicy{agentIsRoot: true, allowRoot: true}, lookup, filepath.Join(private, "containers"), exe, hclog.NewNullLogger()); err != nil {
		t.Fatal(err)
	}
}
