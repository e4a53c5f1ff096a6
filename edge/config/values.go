package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Configuration values from elsewhere (DESIGN.md, "Configuration file"):
// any string value written whole as ${file:PATH} is the content of that
// file (one trailing newline dropped), and ${env:NAME} the value of that
// environment variable, so that secrets (basic-auth hashes, a Redis URL
// with its password, EAB keys) need not stand in the configuration file.
// systemd's LoadCredential= puts them in /run/credentials/edge.service/,
// readable by the service alone ($CREDENTIALS_DIRECTORY). The reference
// is the whole value: "x${env:A}" is taken as written. Keys are never
// expanded, and a value is read once per load (start and SIGHUP).

// maxValueFileBytes bounds a ${file:…} value: secrets are small, and a
// mistyped path to a large file must not be read whole.
const maxValueFileBytes = 1 << 20

var (
	errValueFile = errors.New("cannot read the file of ${file:…}")
	errValueEnv  = errors.New("the environment variable of ${env:…} is not set")
)

// expandValues replaces each ${file:…} and ${env:…} scalar value under n,
// and returns an error (with file, line and key) for each it could not
// read. It visits at most maxWalkNodes nodes and does not follow aliases:
// an anchor's values are expanded where it stands.
func expandValues(file string, n *yaml.Node) []error {
	e := expander{file: file}
	e.node(n, "")
	return e.errs
}

type expander struct {
	file   string
	errs   []error
	visits int
}

func (e *expander) node(n *yaml.Node, path string) {
	if e.visits++; e.visits > maxWalkNodes {
		return
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			e.node(n.Content[i+1], join(path, n.Content[i].Value))
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			e.node(item, fmt.Sprintf("%s[%d]", path, i))
		}
	case yaml.ScalarNode:
		v, ok, err := valueOf(n.Value)
		switch {
		case err != nil:
			e.errs = append(e.errs, &Error{File: e.file, Line: n.Line, Key: path, Err: err})
		case ok:
			n.Value, n.Tag, n.Style = v, "!!str", 0
		}
	}
}

// valueOf returns the value s refers to, and whether it is a reference.
func valueOf(s string) (string, bool, error) {
	ref, ok := strings.CutPrefix(s, "${")
	if !ok {
		return "", false, nil
	}
	ref, ok = strings.CutSuffix(ref, "}")
	if !ok {
		return "", false, nil
	}
	kind, arg, ok := strings.Cut(ref, ":")
	if !ok || arg == "" {
		return "", false, nil
	}
	switch kind {
	case "file":
		b, err := readValueFile(arg)
		if err != nil {
			return "", true, fmt.Errorf("%w: %w", errValueFile, err)
		}
		v := strings.TrimSuffix(string(b), "\n")
		return strings.TrimSuffix(v, "\r"), true, nil
	case "env":
		v, set := os.LookupEnv(arg)
		if !set {
			return "", true, fmt.Errorf("%w: %s", errValueEnv, arg)
		}
		return v, true, nil
	}
	return "", false, nil
}

// readValueFile reads at most maxValueFileBytes of path.
func readValueFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxValueFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxValueFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxValueFileBytes)
	}
	return b, nil
}
