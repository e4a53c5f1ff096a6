package main

import (
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/maatproxy/maat/edge/config"
)

// TestStormThroughTheEdge runs a small storm through a real edge process
// (the built-in default policy, which challenges every new browser) and
// checks the harness's accounting, not its timing: the people given a
// minted pass all hold one the edge accepts and were all served; each bot kind's requests that reached
// the upstream are exactly those answered 2xx (the upstream is the only
// one that answers 2xx; a request the run's end cut may have reached it
// or not), so a refused or challenged request never counts as reaching it; the kinds the default policy refuses (the utls Chrome
// parrot with Go's HTTP/2, the unverified CCBot, python-requests over Go's
// TLS, which its client-lie rule challenges) reached it not once, and
// the one it lets in (Go as itself) every time but when the run's end cut
// them.
func TestStormThroughTheEdge(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the edge")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "edge")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../../cmd/edge").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	up, err := newUpstream(8, 2000)
	if err != nil {
		t.Fatal(err)
	}
	defer up.close()
	f, err := startMaat(ctx, bin, dir, up.url, "", true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.stop()
	o, err := parseFlags([]string{"-people", "3", "-pass", "0.67", "-think", "100ms", "-bots", "4", "-rate", "40",
		"-addrs", "40", "-per-addr", "3", "-kinds", "python,go,parrot,crawler", "-storm", "2s", "-timeout", "20s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r, err := storm(ctx, o, f, up, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if r.people.passes != 2 || len(r.people.earnErrs) > 0 {
		t.Errorf("%d people earned a pass, want 2 (%v)", r.people.passes, r.people.earnErrs)
	}
	with := r.people.s[phaseStorm][1]
	if with.requests == 0 || with.ok != with.requests {
		t.Errorf("people with a pass: %d of %d requests served, want all (failed %d, challenged %d)",
			with.ok, with.requests, with.failed, with.challenged)
	}
	if got := up.people.Load(); got < int64(with.ok) {
		t.Errorf("the upstream saw %d people's requests, fewer than the %d served", got, with.ok)
	}
	for _, k := range r.kinds {
		sent, ok := r.bots.sent[k].Load(), r.bots.ok[k].Load()
		if sent == 0 {
			t.Errorf("%s: no request sent", k)
			continue
		}
		// A request the run's end cut may or may not have reached it.
		cut := r.bots.cut[k].Load()
		if r.reached[k] < ok || r.reached[k] > ok+cut {
			t.Errorf("%s: %d requests reached the upstream, but %d were answered 2xx (of %d sent; %d refused, %d failed, %d of them cut by the end)",
				k, r.reached[k], ok, sent, r.bots.refused[k].Load(), r.bots.failed[k].Load(), cut)
		}
		switch k {
		case kindParrot, kindCrawler, kindPython:
			if r.reached[k] != 0 || ok != 0 {
				t.Errorf("%s: %d of %d reached the upstream and %d were answered 2xx; the default policy refuses them all",
					k, r.reached[k], sent, ok)
			}
		case kindGo:
			// All but those the run's end cut.
			if r.reached[k] < sent-cut || r.bots.refused[k].Load() != 0 {
				t.Errorf("%s: %d of %d reached the upstream (%d refused, %d failed, %d of them cut by the end: %v); the default policy lets them all in",
					k, r.reached[k], sent, r.bots.refused[k].Load(), r.bots.failed[k].Load(), cut, r.bots.firstError(k))
			}
		}
	}
}

// TestMaatConfig: the edge reads the configuration the harness writes,
// with -maat-config merged over it key by key.
func TestMaatConfig(t *testing.T) {
	t.Parallel()
	text, err := maatConfig(t.TempDir(), 8443, 9100, "http://127.0.0.1:3000", "limits: {body_timeout: 5s}\nlog: {level: info}")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("edge.yaml", text)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if cfg.Listen.HTTPS != "127.0.0.1:8443" || cfg.Log.Level != "info" || cfg.Log.Fingerprints != "" || cfg.Limits.BodyTimeout.D() != 5*time.Second {
		t.Errorf("listen %+v, log %+v, body_timeout %v", cfg.Listen, cfg.Log, cfg.Limits.BodyTimeout.D())
	}
	if _, err := maatConfig(t.TempDir(), 1, 2, "http://x", "[not a map"); err == nil {
		t.Error("bad -maat-config YAML accepted")
	}
}
