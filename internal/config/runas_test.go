package config

import "testing"

func TestContainerUserSettings(t *testing.T) {
	cfg, err := loadAgent(t, "", "-data-dir", "d", "-join", "x")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AllowRoot || cfg.RunAsUser {
		t.Fatalf("allow_root %v, run_as_user %v by default; both must be off", cfg.AllowRoot, cfg.RunAsUser)
	}
	cfg, err = loadAgent(t, "allow_root = true\nrun_as_user = true\n", "-data-dir", "d", "-join", "x")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.AllowRoot || !cfg.RunAsUser {
		t.Fatalf("from the file: allow_root %v, run_as_user %v", cfg.AllowRoot, cfg.RunAsUser)
	}
	cfg, err = loadAgent(t, "allow_root = true\n", "-data-dir", "d", "-join", "x", "-allow-root=false", "-run-as-user")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AllowRoot || !cfg.RunAsUser {
		t.Fatalf("flags over the file: allow_root %v, run_as_user %v", cfg.AllowRoot, cfg.RunAsUser)
	}
}
