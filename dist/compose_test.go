package dist_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
)

// TestComposeFile: dist/compose/compose.yaml loads and validates with
// compose-go (the library docker compose itself uses); it runs two edge
// nodes of the image sharing one Redis and one challenge secret, each with
// its own /data, none as root nor with capabilities; and the configuration
// each node runs passes edge config check with that node's environment.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs("compose")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir() // compose wants the secret's file to exist
	for _, f := range []string{"compose.yaml"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, filepath.Join(work, f), b)
	}
	writeTestFile(t, filepath.Join(work, "secret"), []byte("0123456789abcdef0123456789abcdef"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // go build on a cold cache
	defer cancel()
	opts, err := cli.NewProjectOptions([]string{filepath.Join(work, "compose.yaml")},
		cli.WithWorkingDirectory(work), cli.WithEnv([]string{"MAAT_HOST=forge.example.org"}), cli.WithResolvedPaths(true))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(ctx)
	if err != nil {
		t.Fatalf("compose-go: %v", err)
	}
	names := p.ServiceNames()
	slices.Sort(names)
	if !slices.Equal(names, []string{"app", "edge1", "edge2", "redis"}) {
		t.Fatalf("services %v", names)
	}
	edgeBin := edgeBinary(t)
	var datas []string
	for _, n := range []string{"edge1", "edge2"} {
		s := p.Services[n]
		env := map[string]string{}
		for k, v := range s.Environment {
			if v != nil {
				env[k] = *v
			}
		}
		if !strings.HasPrefix(s.Image, "maat/edge:") || env["MAAT_STORE"] != "redis" || !strings.HasPrefix(env["MAAT_REDIS_URL"], "redis://redis:") ||
			env["MAAT_HOST"] != "forge.example.org" || env["MAAT_SECRET_FILE"] != "/run/secrets/maat_secret" {
			t.Errorf("%s: image %q, environment %v", n, s.Image, env)
		}
		if len(s.Secrets) != 1 || s.Secrets[0].Source != "maat_secret" {
			t.Errorf("%s: secrets %v, want maat_secret", n, s.Secrets)
		}
		if !slices.Equal(s.CapDrop, []string{"ALL"}) || !s.ReadOnly || s.User != "" && s.User != "65532:65532" {
			t.Errorf("%s: cap_drop %v, read_only %v, user %q", n, s.CapDrop, s.ReadOnly, s.User)
		}
		if _, ok := s.DependsOn["redis"]; !ok {
			t.Errorf("%s does not wait for redis: %v", n, s.DependsOn)
		}
		if s.HealthCheck == nil || !slices.Contains(s.HealthCheck.Test, "health") {
			t.Errorf("%s: healthcheck %v, want edge health", n, s.HealthCheck)
		}
		for _, v := range s.Volumes {
			if v.Target == "/data" {
				datas = append(datas, v.Source)
			}
		}
		checkNodeConfig(t, edgeBin, n, env)
	}
	if len(datas) != 2 || datas[0] == datas[1] {
		t.Errorf("the nodes' /data volumes %v: want one each", datas)
	}
	if _, ok := p.Secrets["maat_secret"]; !ok {
		t.Error("no maat_secret secret")
	}
}

// checkNodeConfig runs edge config check on the image's configuration with
// a node's environment, as the node would read it.
func checkNodeConfig(t *testing.T, edgeBin, node string, env map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, edgeBin, "config", "check", "-offline", "-config", "container/edge.yaml")
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s: edge config check: %v\n%s", node, err, out)
	}
}

// edgeBinary is the edge built from this tree once for the package's
// tests (the configuration checks of the compose file and the chart).
func edgeBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "maat-dist-edge-")
		if err != nil {
			built.err = err
			return
		}
		built.path = filepath.Join(dir, "edge")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a cold build cache
		defer cancel()
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", built.path, "../cmd/edge").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

var built struct {
	once sync.Once
	path string
	err  error
}

func writeTestFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
