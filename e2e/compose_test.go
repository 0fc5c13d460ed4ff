//go:build compose

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// composeProject is the docker-compose project the test brings up (and
// down): its containers, network and volumes carry this name.
const composeProject = "weft-compose-test"

// composeServers names docker-compose.yml's servers by RPC address.
var composeServers = map[string]string{"172.28.0.11:8030": "s1", "172.28.0.12:8030": "s2", "172.28.0.13:8030": "s3"}

// TestComposeClusterSurvivesALeaderKill builds the FROM-scratch image,
// brings up docker-compose.yml's secure cluster (three servers, three
// agents; TLS, gossip key, ACLs), runs an app through it from this host with
// the client certificate and the bootstrap token, kills the leader's
// container while the app runs, and sees the app finish (SPEC §20, §13).
// It runs from `make compose-test` (build tag compose), not `make e2e`:
// it needs Docker and docker-compose, and fails saying so without them.
func TestComposeClusterSurvivesALeaderKill(t *testing.T) {
	for _, tool := range []string{"docker", "docker-compose"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH: the compose test needs Docker and docker-compose (Debian: apt-get install docker.io docker-compose)", tool)
		}
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	image := "weft:compose-test"
	hostRun(t, root, nil, "make", "--no-print-directory", "image", "IMAGE="+image)
	t.Logf("image built in %s", time.Since(began).Round(time.Second))

	secrets := t.TempDir()
	ports := []int{freePort(t, "127.0.0.1"), freePort(t, "127.0.0.1"), freePort(t, "127.0.0.1")}
	env := []string{"WEFT_IMAGE=" + image, "WEFT_SECRETS=" + secrets}
	var addrs []string
	for i, p := range ports {
		env = append(env, fmt.Sprintf("WEFT_S%d_PORT=%d", i+1, p))
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(p))
	}
	compose := func(args ...string) string {
		return hostRun(t, root, env, "docker-compose", append([]string{"-p", composeProject}, args...)...)
	}
	compose("down", "-v", "--remove-orphans") // a previous run killed half-way
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := hostCommand(root, env, "docker-compose", "-p", composeProject, "logs", "--no-color", "--tail", "40")
			t.Logf("---- docker-compose logs ----\n%s", out)
		}
		if out, err := hostCommand(root, env, "docker-compose", "-p", composeProject, "down", "-v", "--remove-orphans"); err != nil {
			t.Errorf("docker-compose down: %v\n%s", err, out)
		}
	})
	compose("up", "-d")
	t.Logf("cluster up in %s", time.Since(began).Round(time.Second))

	// The client: the certificates the init services wrote, every server's
	// published port, and the token the bootstrap prints.
	t.Setenv("WEFT_CACERT", filepath.Join(secrets, "weft-agent-ca.pem"))
	t.Setenv("WEFT_CLIENT_CERT", filepath.Join(secrets, "global-client-weft.pem"))
	t.Setenv("WEFT_CLIENT_KEY", filepath.Join(secrets, "global-client-weft-key.pem"))
	all := strings.Join(addrs, ",")
	var token struct {
		SecretID string `json:"secret_id"`
	}
	waitFor(t, 2*time.Minute, "the servers to elect a leader and take the ACL bootstrap", func() error {
		return cliJSON(t, &token, "acl", "bootstrap", "-address", all)
	})
	t.Setenv("WEFT_TOKEN", token.SecretID)
	if _, errOut, code := cli(t, "members", "-address", all, "-token", ""); code == 0 {
		t.Fatalf("the cluster answered a request without a token: ACLs are off (%s)", errOut)
	}
	// The agents register once a node-join token is where their config
	// says (deploy/agent.hcl): the operator introduces them.
	var join struct {
		Token string `json:"token"`
	}
	waitFor(t, time.Minute, "a node-join token", func() error {
		return cliJSON(t, &join, "node", "join-token", "create", "-address", all)
	})
	if err := os.WriteFile(filepath.Join(secrets, "join-token"), []byte(join.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "three agents READY", func() error {
		var nodes []struct {
			Status string `json:"status"`
		}
		if err := cliJSON(t, &nodes, "node", "list", "-address", all); err != nil {
			return err
		}
		ready := 0
		for _, n := range nodes {
			if n.Status == "READY" {
				ready++
			}
		}
		if ready != 3 {
			return fmt.Errorf("%d of %d nodes READY", ready, len(nodes))
		}
		return nil
	})

	// An app of many short containers (the image holds only weft, so they
	// run weft itself), in waves: three agents of 1 GiB hold 11 at a time.
	const containers = 200
	var sub struct {
		AppID string `json:"app_id"`
	}
	if err := cliJSON(t, &sub, "app", "submit", "-address", all, "-num-containers", strconv.Itoa(containers),
		"-memory-mb", "256", "-vcores", "1", "--", "/weft", "version"); err != nil {
		t.Fatal(err)
	}
	type appStatus struct {
		State      string `json:"state"`
		Containers struct {
			Completed int `json:"completed"`
		} `json:"containers"`
	}
	var before appStatus
	waitFor(t, time.Minute, "the app to run", func() error {
		if err := cliJSON(t, &before, "app", "status", "-address", all, sub.AppID); err != nil {
			return err
		}
		if before.State != "RUNNING" || before.Containers.Completed == 0 {
			return fmt.Errorf("app %s, %d containers completed", before.State, before.Containers.Completed)
		}
		return nil
	})
	var st struct {
		Leader string `json:"leader"`
	}
	if err := cliJSON(t, &st, "status", "-address", all); err != nil {
		t.Fatal(err)
	}
	leader := composeServers[st.Leader]
	if leader == "" {
		t.Fatalf("leader %q is none of the compose servers", st.Leader)
	}
	compose("kill", leader)
	killedAt := time.Now()
	t.Logf("killed the leader %s with the app RUNNING, %d of %d containers completed", leader, before.Containers.Completed, containers)
	if before.Containers.Completed >= containers {
		t.Fatalf("the app had run every container before the leader was killed: the kill proves nothing")
	}

	// The survivors elect a leader and the app finishes.
	var survivors []string
	for i, name := range []string{"s1", "s2", "s3"} {
		if name != leader {
			survivors = append(survivors, addrs[i])
		}
	}
	if out, errOut, code := cli(t, "app", "wait", "-address", strings.Join(survivors, ","), sub.AppID); code != 0 {
		t.Fatalf("app wait after the leader kill: exit %d\n%s%s", code, out, errOut)
	}
	var after appStatus
	if err := cliJSON(t, &after, "app", "status", "-address", strings.Join(survivors, ","), sub.AppID); err != nil {
		t.Fatal(err)
	}
	if after.State != "FINISHED" || after.Containers.Completed < containers {
		t.Fatalf("after the leader kill the app is %s with %d of %d containers completed", after.State, after.Containers.Completed, containers)
	}
	if err := cliJSON(t, &st, "status", "-address", strings.Join(survivors, ",")); err != nil || st.Leader == "" || composeServers[st.Leader] == leader {
		t.Fatalf("no new leader among the survivors: %q (%v)", st.Leader, err)
	}
	t.Logf("the app FINISHED %s after the leader kill (new leader %s); whole test %s",
		time.Since(killedAt).Round(100*time.Millisecond), st.Leader, time.Since(began).Round(time.Second))
}

// hostCommand runs name in dir with env added, returning its combined output.
func hostCommand(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// hostRun is hostCommand that fails the test on an error.
func hostRun(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, err := hostCommand(dir, env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}
