package dist_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// helm runs go.mod's helm tool (helm.sh/helm/v4) on the chart.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute) // builds helm on a cold cache
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"tool", "helm"}, args...)...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestHelmChart: dist/helm/maat passes helm lint --strict; helm template
// renders a Deployment of the image that runs as the image's user without
// capabilities, probed on the admin listener, a Service for TCP and UDP
// (HTTP/3), a ConfigMap whose edge.yaml passes edge config check, and a
// challenge Secret; several nodes without Redis are refused with a clear
// message.
func TestHelmChart(t *testing.T) {
	t.Parallel()
	chart, err := filepath.Abs("helm/maat")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := helm(t, "lint", "--strict", chart); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	out, err := helm(t, "template", "site", chart, "--namespace", "web")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	docs := map[string]map[string]any{}
	dec := yaml.NewDecoder(strings.NewReader(out))
	for {
		var d map[string]any
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("the rendered chart is not YAML: %v\n%s", err, out)
		}
		if d != nil {
			docs[d["kind"].(string)] = d
		}
	}
	for _, k := range []string{"Deployment", "Service", "ConfigMap", "Secret"} {
		if docs[k] == nil {
			t.Fatalf("helm template renders no %s:\n%s", k, out)
		}
	}
	pod := dig(docs["Deployment"], "spec", "template", "spec").(map[string]any)
	if sc := pod["securityContext"].(map[string]any); sc["runAsNonRoot"] != true || sc["runAsUser"] != 65532 {
		t.Errorf("pod securityContext %v", sc)
	}
	c := pod["containers"].([]any)[0].(map[string]any)
	if c["image"] != "maat/edge:latest" {
		t.Errorf("image %v", c["image"])
	}
	csc := c["securityContext"].(map[string]any)
	if csc["readOnlyRootFilesystem"] != true || csc["allowPrivilegeEscalation"] != false ||
		!strings.Contains(strings.Join(strs(dig(csc, "capabilities", "drop")), ","), "ALL") {
		t.Errorf("container securityContext %v", csc)
	}
	if dig(c, "readinessProbe", "httpGet", "path") != "/readyz" || dig(c, "livenessProbe", "httpGet", "path") != "/healthz" {
		t.Errorf("probes %v %v", c["readinessProbe"], c["livenessProbe"])
	}
	var protos []string
	for _, p := range dig(docs["Service"], "spec", "ports").([]any) {
		protos = append(protos, p.(map[string]any)["protocol"].(string))
	}
	if s := strings.Join(protos, ","); s != "TCP,UDP,TCP" {
		t.Errorf("service protocols %s, want TCP,UDP,TCP (https, http3, http)", s)
	}
	if dig(docs["Secret"], "data", "secret") == nil {
		t.Error("the challenge Secret has no key secret")
	}

	// The configuration the pods run passes edge config check.
	conf, _ := dig(docs["ConfigMap"], "data", "edge.yaml").(string)
	dir := t.TempDir()
	file := filepath.Join(dir, "edge.yaml")
	writeTestFile(t, file, []byte(conf))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if b, err := exec.CommandContext(ctx, edgeBinary(t), "config", "check", "-offline", "-config", file).CombinedOutput(); err != nil {
		t.Errorf("edge config check of the chart's edge.yaml: %v\n%s\n%s", err, b, conf)
	}

	// Bad values get the chart's message, not a broken cluster.
	if out, err := helm(t, "template", "site", chart, "--set", "replicas=2"); err == nil || !strings.Contains(out, "needs config.store.kind: redis") {
		t.Errorf("replicas=2 with the memory store: %v\n%s", err, out)
	}
	if out, err := helm(t, "template", "site", chart, "--set", "replicas=2", "--set", "config.store.kind=redis",
		"--set", "config.store.url=redis://redis:6379/0"); err != nil {
		t.Errorf("replicas=2 with redis: %v\n%s", err, out)
	}
}

func dig(m any, keys ...string) any {
	for _, k := range keys {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[k]
	}
	return m
}

func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
