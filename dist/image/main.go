// Command image builds the edge's OCI image without a container daemon:
// one layer holding the static binary, the container configuration, CA
// roots and a /data directory owned by the unprivileged user, written as an
// OCI image layout directory and as a tarball `docker load` and `podman
// load` take. `make image` builds the binary and runs this; dist's
// TestImage checks the result.
//
// go-containerregistry (a go.mod dependency) writes the layout and the
// tarball: it is what ko and crane are made of, and writing OCI manifests,
// digests and docker's tarball format by hand is exactly the machinery we
// do not want to own.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// UID and GID the edge runs as: the "nonroot" user of distroless images.
const uid, gid = 65532, 65532

// Repository is the name the tarball's tags carry.
const Repository = "maat/edge"

func main() {
	bin := flag.String("bin", "", "the edge binary, static (CGO_ENABLED=0)")
	conf := flag.String("config", "dist/container/edge.yaml", "configuration installed as /etc/edge/edge.yaml")
	roots := flag.String("roots", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of CA roots (for ACME and https upstreams)")
	version := flag.String("version", "", "image version (tag and org.opencontainers.image.version)")
	revision := flag.String("revision", "", "source commit (org.opencontainers.image.revision)")
	arch := flag.String("arch", "amd64", "GOARCH of the binary")
	out := flag.String("o", "bin/image", "output directory: oci/ (an OCI image layout) and edge.tar")
	flag.Parse()
	if err := build(*bin, *conf, *roots, *version, *revision, *arch, *out); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func build(bin, conf, roots, version, revision, arch, out string) error {
	if bin == "" || version == "" {
		return errors.New("-bin and -version are required")
	}
	files := []file{{name: "usr/bin/edge", src: bin, mode: 0o755}, {name: "etc/edge/edge.yaml", src: conf, mode: 0o644}}
	if roots != "" {
		files = append(files, file{name: "etc/ssl/certs/ca-certificates.crt", src: roots, mode: 0o644})
	}
	layerTar, err := layerBytes(files)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = arch, "linux"
	cf.Created = v1.Time{Time: commitTime()}
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", uid, gid),
		Entrypoint: []string{"/usr/bin/edge"},
		Cmd:        []string{"run", "-config", "/etc/edge/edge.yaml"},
		WorkingDir: "/data",
		Env: []string{
			"PATH=/usr/bin",
			"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
			// The defaults of what dist/container/edge.yaml reads.
			"MAAT_TLS_MODE=self-signed", "MAAT_ACME_EMAIL=", "MAAT_HOST=localhost",
			"MAAT_UPSTREAM=http://app:3000", "MAAT_STORE=memory", "MAAT_REDIS_URL=",
			"MAAT_SECRET_FILE=/data/secret",
		},
		ExposedPorts: map[string]struct{}{"8443/tcp": {}, "8443/udp": {}, "8080/tcp": {}, "9100/tcp": {}},
		Volumes:      map[string]struct{}{"/data": {}},
		StopSignal:   "SIGTERM",
		Labels: map[string]string{
			"org.opencontainers.image.title":    "Maat edge",
			"org.opencontainers.image.source":   "https://github.com/maatproxy/maat",
			"org.opencontainers.image.licenses": "Apache-2.0",
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.revision": revision,
		},
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(out, "oci")); err != nil {
		return err
	}
	p, err := layout.Write(filepath.Join(out, "oci"), empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": version})); err != nil {
		return err
	}
	tags := map[name.Reference]v1.Image{}
	for _, t := range []string{version, "latest"} {
		tag, err := name.NewTag(Repository + ":" + sanitizeTag(t))
		if err != nil {
			return err
		}
		tags[tag] = img
	}
	if err := tarball.MultiRefWriteToFile(filepath.Join(out, "edge.tar"), tags); err != nil {
		return err
	}
	d, _ := img.Digest()
	fmt.Printf("%s:%s %s\n%s\n%s\n", Repository, sanitizeTag(version), d, filepath.Join(out, "oci"), filepath.Join(out, "edge.tar"))
	return nil
}

// sanitizeTag makes a version a valid tag: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
// ("1.2.3+git3.abc" → "1.2.3-git3.abc").
func sanitizeTag(v string) string {
	b := []byte(v)
	for i, c := range b {
		ok := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || i > 0 && (c == '.' || c == '-')
		if !ok {
			b[i] = '-'
		}
	}
	if len(b) > 128 {
		b = b[:128]
	}
	return string(b)
}

// commitTime is SOURCE_DATE_EPOCH when set, so that a build is
// reproducible; else the Unix epoch.
func commitTime() time.Time {
	var s int64
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		fmt.Sscan(v, &s)
	}
	return time.Unix(s, 0).UTC()
}

type file struct {
	name, src string
	mode      int64
}

// layerBytes is the layer's tar: the directories, the files (owned by
// root, read-only to the edge) and /data, owned by the edge's user.
func layerBytes(files []file) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := commitTime()
	dirs := []string{"usr/", "usr/bin/", "etc/", "etc/edge/", "etc/ssl/", "etc/ssl/certs/", "tmp/"}
	for _, d := range dirs {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: mode, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "data/", Mode: 0o750, Uid: uid, Gid: gid, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	// /etc/passwd and /etc/group name the user, for tools that look it up.
	for _, f := range []struct{ name, text string }{
		{"etc/passwd", fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/data:/sbin/nologin\n", uid, gid)},
		{"etc/group", fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", gid)},
	} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.text)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := io.WriteString(tw, f.text); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f.src)
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(b)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
