package edge

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/maatproxy/maat/edge/config"
)

// TestLocateNewErrors: an error New or NewHandler returns under a key (the
// policy) gets the line the key was written on.
func TestLocateNewErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg, err := config.Parse(dir+"/edge.yaml", []byte("tls: {mode: self-signed, cache: ''}\n\npolicy: "+dir+"/missing.yaml\nsites: [{hosts: [a.example], upstream: 'http://127.0.0.1:1'}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewHandler(cfg, Env{})
	want := dir + "/edge.yaml:3: policy: open " + dir + "/missing.yaml: no such file or directory"
	if err == nil || cfg.Locate(err).Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

// TestValidateOnce: a configuration is validated once, where it is
// loaded. New, NewHandler and Reload (and Start, which builds the Handler
// again once it knows its port) take one that ParseConfig returned as it
// is, and validate one built in code once each.
func TestValidateOnce(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	hooks := testHooks{validating: func() { runs.Add(1) }}
	want := func(n int32, after string) {
		t.Helper()
		if got := runs.Load(); got != n {
			t.Errorf("after %s: the edge validated %d times in all, want %d", after, got, n)
		}
	}
	text := edgeConfigText("", "policy: \"\"\nsites: [{hosts: [localhost], upstream: 'http://127.0.0.1:1'}]\n")
	load := func() config.Config {
		t.Helper()
		cfg, err := config.Parse("test.yaml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	built := config.Default()
	built.Listen = config.Listen{HTTPS: "127.0.0.1:0"}
	built.TLS = config.TLSConfig{Mode: "self-signed"}
	up, err := config.ParseUpstream("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	built.Sites = []config.Site{{Hosts: []string{"localhost"}, Upstream: config.Upstreams{up}}}

	s := startServerHooks(t, load(), hooks, nil)
	want(0, "New and Start of a loaded configuration")
	if err := s.Reload(load()); err != nil {
		t.Fatal(err)
	}
	want(0, "Reload of a loaded configuration")
	if err := s.Reload(built); err != nil {
		t.Fatal(err)
	}
	want(1, "Reload of a configuration built in code")
	h, err := NewHandler(built, Env{hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	want(2, "NewHandler of a configuration built in code")
	startServerHooks(t, built, hooks, nil)
	want(3, "New and Start of a configuration built in code")

	// Not even a validation past the hook: a loaded configuration changed
	// into a bad one is taken as it is (whoever changes one validates it).
	changed := load()
	changed.Timeouts.FailPause = 0
	h, err = NewHandler(changed, Env{hooks: hooks})
	if err != nil {
		t.Fatalf("NewHandler validated a loaded configuration again: %v", err)
	}
	h.Close()
	want(3, "NewHandler of a loaded configuration")

	built.Limits.H2Streams = 0
	if _, err := NewHandler(built, Env{hooks: hooks}); err == nil || !strings.Contains(err.Error(), "limits.h2_streams") {
		t.Errorf("NewHandler of a bad configuration built in code: %v, want limits.h2_streams refused", err)
	}
	want(4, "NewHandler of a bad configuration built in code")
}
