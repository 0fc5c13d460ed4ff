package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// httpURL reads the URL a server or agent logged for its HTTP API.
func httpURL(t *testing.T, p *proc) string {
	t.Helper()
	re := regexp.MustCompile(`HTTP API listening: url=(\S+)`)
	var url string
	waitFor(t, 30*time.Second, p.name+"'s HTTP URL in its log", func() error {
		b, err := os.ReadFile(p.log)
		if err != nil {
			return err
		}
		m := re.FindSubmatch(b)
		if m == nil {
			return fmt.Errorf("not logged yet")
		}
		url = string(m[1])
		return nil
	})
	return url
}

// httpsClient trusts the cluster's CA and checks the certificate of a
// process of role (server or agent), whatever address it is reached at.
func httpsClient(t *testing.T, sec *security, role string) *http.Client {
	t.Helper()
	ca, err := os.ReadFile(sec.file("weft-agent-ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		t.Fatal("no CA certificate in the PEM")
	}
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: role + ".global.weft"}}}
}

// get GETs url with token ("" for none) and returns status, headers, body.
func httpGet(t *testing.T, c *http.Client, url, token string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("X-Weft-Token", token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, resp.Header, b
}

// The HTTP API of a secure cluster: HTTPS with the servers' certificate,
// the ACL token in a header; an app submitted with POST /v1/apps is
// followed to its end with blocking queries and its logs are read from a
// server and from the agent that ran it.
func TestHTTPAPIRunsAnAppOnASecureCluster(t *testing.T) {
	w := startWorld(t)
	token := os.Getenv("WEFT_TOKEN")
	srvClient := httpsClient(t, w.sec, "server")
	base := httpURL(t, w.procs["s2"])
	if !regexp.MustCompile(`^https://127\.0\.0\.2:\d+$`).MatchString(base) {
		t.Fatalf("s2 serves its API at %s, want HTTPS on its bind address", base)
	}

	code, _, body := httpGet(t, srvClient, base+"/v1/nodes", "")
	if code != http.StatusForbidden || !bytes.Contains(body, []byte(`"error"`)) {
		t.Fatalf("GET /v1/nodes without a token: %d %s", code, body)
	}

	spec := `{"name": "http-e2e", "dshell": {"command": ["sh", "-c", "echo hello-over-http"], "num_containers": 2,
	  "resources": {"memory_mb": 64, "vcores": 1}}}`
	req, _ := http.NewRequest("POST", base+"/v1/apps", bytes.NewBufferString(spec))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := srvClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var sub struct {
		AppID string `json:"app_id"`
	}
	err = json.NewDecoder(resp.Body).Decode(&sub)
	resp.Body.Close()
	if resp.StatusCode != 200 || err != nil || sub.AppID == "" {
		t.Fatalf("POST /v1/apps: %d %v %+v", resp.StatusCode, err, sub)
	}

	var app struct {
		State string `json:"state"`
		User  string `json:"user"`
	}
	var index uint64
	for i := 0; ; i++ {
		if i == 60 {
			t.Fatalf("app %s did not end: %+v", sub.AppID, app)
		}
		code, h, body := httpGet(t, srvClient, fmt.Sprintf("%s/v1/app/%s?index=%d&wait=10s", base, sub.AppID, index), token)
		if code != 200 {
			t.Fatalf("GET /v1/app/%s: %d %s", sub.AppID, code, body)
		}
		if err := json.Unmarshal(body, &app); err != nil {
			t.Fatal(err)
		}
		next, err := strconv.ParseUint(h.Get("X-Weft-Index"), 10, 64)
		if err != nil || next < index {
			t.Fatalf("X-Weft-Index %q after %d", h.Get("X-Weft-Index"), index)
		}
		index = next
		if app.State == "FINISHED" || app.State == "FAILED" || app.State == "KILLED" {
			break
		}
	}
	var self struct {
		Name string `json:"name"`
	}
	if code, _, body := httpGet(t, srvClient, base+"/v1/acl/token/self", token); code != 200 || json.Unmarshal(body, &self) != nil {
		t.Fatalf("GET /v1/acl/token/self: %d %s", code, body)
	}
	if app.State != "FINISHED" || app.User != self.Name {
		t.Fatalf("app ended %+v; want FINISHED as the token's name %q", app, self.Name)
	}

	code, _, body = httpGet(t, srvClient, base+"/v1/app/"+sub.AppID+"/containers", token)
	var ctrs []containerInfo
	if code != 200 || json.Unmarshal(body, &ctrs) != nil || len(ctrs) != 3 {
		t.Fatalf("containers of %s: %d %s", sub.AppID, code, body)
	}
	var work containerInfo
	for _, c := range ctrs {
		if !c.IsAM {
			work = c
		}
	}
	if work.State != "COMPLETED" || work.AppID != sub.AppID {
		t.Fatalf("container %+v", work)
	}
	code, h, logs := httpGet(t, srvClient, base+"/v1/container/"+work.ID+"/logs", token)
	if code != 200 || string(logs) != "hello-over-http\n" || h.Get("X-Weft-Log-Done") != "true" {
		t.Fatalf("logs of %s from s2: %d %q %v", work.ID, code, logs, h)
	}

	// The agent that ran it serves its logs too (the servers check the
	// token), over HTTPS with the agent's certificate.
	agentBase := httpURL(t, w.agents[work.NodeID])
	code, _, logs = httpGet(t, httpsClient(t, w.sec, "agent"), agentBase+"/v1/container/"+work.ID+"/logs?follow=true", token)
	if code != 200 || string(logs) != "hello-over-http\n" {
		t.Fatalf("logs of %s from agent %s: %d %q", work.ID, work.NodeID, code, logs)
	}
}
