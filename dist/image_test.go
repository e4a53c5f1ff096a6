package dist_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/maatproxy/maat/internal/testenv"
)

// TestImage builds the OCI image with `make image`, as on a clean clone,
// and checks what a container runtime would run: the configuration
// (non-root user, entrypoint, /data volume), the files of its one layer,
// the tarball's tags; then runs the image's binary in a root made of the
// layer, as the image's user with the image's environment: it prints its
// version and checks the image's configuration.
func TestImage(t *testing.T) {
	t.Parallel()
	mk := testenv.NeedCommand(t, "make")
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mk, "-s", "image", "IMAGEDIR="+out)
	cmd.Dir = repo
	made, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make image: %v\n%s", err, made)
	}
	version := strings.TrimSpace(string(runOut(t, repo, mk, "-s", "--no-print-directory", "-f", "Makefile", "-f", "-", "print-version")))

	idx, err := layout.ImageIndexFromPath(filepath.Join(out, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		t.Fatalf("OCI layout: %v, %d manifests, want 1", err, len(im.Manifests))
	}
	if got := im.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; got != version {
		t.Errorf("ref.name %q, want the version %q", got, version)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" || strings.Join(c.Entrypoint, " ") != "/usr/bin/edge" ||
		strings.Join(c.Cmd, " ") != "run -config /etc/edge/edge.yaml" || cf.OS != "linux" {
		t.Errorf("config: user %q, entrypoint %q, cmd %q, os %q", c.User, c.Entrypoint, c.Cmd, cf.OS)
	}
	if _, ok := c.Volumes["/data"]; !ok {
		t.Errorf("volumes %v lack /data", c.Volumes)
	}
	if c.Labels["org.opencontainers.image.version"] != version {
		t.Errorf("version label %q, want %q", c.Labels["org.opencontainers.image.version"], version)
	}

	// The tarball holds the same image under VERSION and latest.
	for _, tag := range []string{sanitized(version), "latest"} {
		ref, err := name.NewTag("maat/edge:" + tag)
		if err != nil {
			t.Fatal(err)
		}
		timg, err := tarball.ImageFromPath(filepath.Join(out, "edge.tar"), &ref)
		if err != nil {
			t.Errorf("edge.tar, tag %s: %v", tag, err)
			continue
		}
		// docker's format has its own manifest; the config and layers are the same.
		c1, _ := timg.ConfigName()
		c2, _ := img.ConfigName()
		l1, _ := timg.Layers()
		l2, _ := img.Layers()
		if c1 != c2 || len(l1) != 1 || len(l2) != 1 {
			t.Errorf("edge.tar's %s has config %s and %d layers, the layout's image %s and %d", tag, c1, len(l1), c2, len(l2))
		} else if d1, _ := l1[0].DiffID(); d1 != must(l2[0].DiffID()) {
			t.Errorf("edge.tar's %s has layer %s, the layout's image %s", tag, d1, must(l2[0].DiffID()))
		}
	}

	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil { // "/" of the image, for its user
		t.Fatal(err)
	}
	entries := unpack(t, img, root)
	for _, tt := range []struct {
		path     string
		mode     os.FileMode
		uid, gid int
	}{
		{"usr/bin/edge", 0o755, 0, 0},
		{"etc/edge/edge.yaml", 0o644, 0, 0},
		{"etc/ssl/certs/ca-certificates.crt", 0o644, 0, 0},
		{"data/", os.ModeDir | 0o750, 65532, 65532},
	} {
		h, ok := entries[tt.path]
		if !ok {
			t.Errorf("the layer lacks /%s", tt.path)
			continue
		}
		if h.FileInfo().Mode() != tt.mode || h.Uid != tt.uid || h.Gid != tt.gid {
			t.Errorf("/%s: %v %d:%d, want %v %d:%d", tt.path, h.FileInfo().Mode(), h.Uid, h.Gid, tt.mode, tt.uid, tt.gid)
		}
	}
	conf, _ := os.ReadFile(filepath.Join(repo, "dist/container/edge.yaml"))
	if got, _ := os.ReadFile(filepath.Join(root, "etc/edge/edge.yaml")); !bytes.Equal(got, conf) {
		t.Error("/etc/edge/edge.yaml differs from dist/container/edge.yaml")
	}

	run := func(args ...string) (string, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "/usr/bin/edge", args...)
		cmd.Dir = "/data"
		cmd.Env = c.Env
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
		if os.Geteuid() == 0 {
			cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 65532, Gid: 65532}
		} else {
			cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER
			cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 65532, HostID: os.Geteuid(), Size: 1}}
			cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 65532, HostID: os.Getegid(), Size: 1}}
		}
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		if errors.Is(err, syscall.EPERM) {
			testenv.Missing(t, "chroot into the unpacked image: %v (run as root, or allow user namespaces)", err)
		}
		return o.String(), e.String(), err
	}
	// A clean clone stamps the commit (a git worktree does not).
	rev := strings.TrimSpace(string(runOut(t, repo, "git", "rev-parse", "--short=12", "HEAD")))
	if o, e, err := run("version"); err != nil || !strings.HasPrefix(o, "edge ") || strings.Contains(o, "(commit ") && !strings.Contains(o, rev) {
		t.Errorf("edge version in the image: %v: %q %q, want edge … commit %s", err, o, e, rev)
	}
	if o, e, err := run("config", "check", "-config", "/etc/edge/edge.yaml"); err != nil {
		t.Errorf("edge config check of the image's own configuration, with its environment: %v\n%s%s", err, o, e)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// sanitized is dist/image's tag of a version.
func sanitized(v string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '.' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, v)
}

func runOut(t *testing.T, dir, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if name != "git" {
		cmd.Stdin = strings.NewReader("print-version:\n\t@echo $(DEB_VERSION)\n")
	}
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return b
}

// unpack writes the image's layers under root, owners included when this
// process may set them, and returns the tar headers by name.
func unpack(t *testing.T, img v1.Image, root string) map[string]*tar.Header {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]*tar.Header{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			entries[h.Name] = h
			p := filepath.Join(root, filepath.FromSlash(h.Name))
			switch h.Typeflag {
			case tar.TypeDir:
				if err := os.MkdirAll(p, 0o755); err != nil {
					t.Fatal(err)
				}
			case tar.TypeReg:
				b, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chmod(p, h.FileInfo().Mode().Perm()|h.FileInfo().Mode()&os.ModeSticky); err != nil {
				t.Fatal(err)
			}
			if os.Geteuid() == 0 {
				if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
					t.Fatal(err)
				}
			}
		}
		rc.Close()
	}
	return entries
}
