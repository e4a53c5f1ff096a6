package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// builtinPrefix names Maat's embedded files in imports:
// (builtin)/default.yaml and the lists of BuiltinLists.
const builtinPrefix = "(builtin)/"

// importFiles reads the files an import: names and adds their rules. A
// relative name is looked up next to the importing file first, then in
// the working directory (where Anubis looks); the error names both.
func (l *loader) importFiles(from string, v *yaml.Node, depth int) error {
	pattern := v.Value
	if v.Kind != yaml.ScalarNode || pattern == "" {
		return fmt.Errorf("%w: %s: import: needs a file name", ErrImport, at(from, v))
	}
	if depth >= maxImportDepth {
		return fmt.Errorf("%w: %s: imports nested deeper than %d", ErrImport, at(from, v), maxImportDepth)
	}
	if strings.HasPrefix(pattern, anubisDataPrefix) {
		return l.importAnubisData(from, v, depth)
	}
	if strings.HasPrefix(pattern, builtinPrefix) {
		data, err := readBuiltin(pattern)
		if err != nil {
			return fmt.Errorf("%w: %s: %w (built in: %s, %s)", ErrImport, at(from, v), err, DefaultName, strings.Join(BuiltinLists(), ", "))
		}
		return l.importOne(from, v, pattern, data, depth)
	}
	cands := importCandidates(from, pattern)
	if strings.ContainsAny(pattern, "*?[") {
		return l.importGlob(from, v, cands, depth)
	}
	var notFound error
	for _, c := range cands {
		data, err := l.opts.readFile(c)
		if errors.Is(err, fs.ErrNotExist) {
			notFound = err
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrImport, at(from, v), err)
		}
		return l.importOne(from, v, c, data, depth)
	}
	return fmt.Errorf("%w: %s: %s not found; tried %s: %w", ErrImport, at(from, v), pattern, describeCandidates(from, cands), notFound)
}

// importCandidates lists where a relative import is looked for: next to
// the importing file, then in the working directory.
func importCandidates(from, pattern string) []string {
	if filepath.IsAbs(pattern) {
		return []string{pattern}
	}
	near := filepath.Join(filepath.Dir(from), pattern)
	cwd := filepath.Clean(pattern)
	if near == cwd {
		return []string{near}
	}
	return []string{near, cwd}
}

func describeCandidates(from string, cands []string) string {
	if len(cands) == 1 {
		return cands[0]
	}
	return cands[0] + " (next to " + from + ") and " + cands[1] + " (the working directory)"
}

// importGlob imports every file the first candidate pattern that matches
// anything matches.
func (l *loader) importGlob(from string, v *yaml.Node, cands []string, depth int) error {
	glob := l.opts.Glob
	if glob == nil {
		glob = filepath.Glob
	}
	var names []string
	for _, c := range cands {
		m, err := glob(c)
		if err != nil {
			return fmt.Errorf("%w: %s: %s: %v", ErrImport, at(from, v), c, err)
		}
		if len(m) > 0 {
			names = m
			break
		}
	}
	sortNatural(names) // Anubis's order of the files a glob matches
	if len(names) == 0 {
		return fmt.Errorf("%w: %s: %s matches no file; tried %s", ErrImport, at(from, v), v.Value, describeCandidates(from, cands))
	}
	var errs []error
	for _, name := range names {
		data, err := l.opts.readFile(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: %w", ErrImport, at(from, v), err))
			continue
		}
		errs = append(errs, l.importOne(from, v, name, data, depth))
	}
	return errors.Join(errs...)
}

func (l *loader) importOne(from string, v *yaml.Node, name string, data []byte, depth int) error {
	if l.visiting[name] {
		return fmt.Errorf("%w: %s: import cycle through %s", ErrImport, at(from, v), name)
	}
	docs, err := decodeDocuments(name, data)
	if err != nil {
		return err
	}
	l.visiting[name] = true
	defer delete(l.visiting, name)
	var errs []error
	for _, root := range docs {
		errs = append(errs, l.imported(name, root, depth+1))
	}
	return errors.Join(errs...)
}

// decodeDocuments reads every YAML document of an imported file, as Anubis
// reads them (a file may hold several lists of rules, separated by ---).
// Empty documents are skipped.
func decodeDocuments(name string, data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s", ErrSyntax, yamlErrorAt(name, err, data))
		}
		if len(doc.Content) == 0 || doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].Tag == "!!null" {
			continue
		}
		docs = append(docs, doc.Content[0])
	}
	return docs, nil
}

// imported reads an imported file: a list of rules (Anubis's snippets), or
// a policy whose bots: are taken in place and whose other sections
// (thresholds:, signals:, status_codes:, hosting_asns:) apply unless the
// importing policy sets them itself.
func (l *loader) imported(name string, root *yaml.Node, depth int) error {
	if root.Kind == yaml.SequenceNode {
		return l.bots(name, root, depth)
	}
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("%w: %s: an imported file is a list of rules or has a bots: key", ErrImport, at(name, root))
	}
	var s settings
	var errs []error
	haveBots := false
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value == "bots" {
			haveBots = true
			errs = append(errs, l.bots(name, v, depth))
			continue
		}
		errs = append(errs, l.section(name, k, v, &s))
	}
	if !haveBots {
		return fmt.Errorf("%w: %s: an imported file is a list of rules or has a bots: key", ErrImport, at(name, root))
	}
	l.p.imported = append(l.p.imported, s)
	return errors.Join(errs...)
}

// readBuiltin reads (builtin)/default.yaml or one of the built-in lists.
func readBuiltin(name string) ([]byte, error) {
	base := strings.TrimPrefix(name, builtinPrefix)
	file := path.Join("lists", base)
	if base == path.Base(DefaultName) {
		file = base
	}
	if strings.Contains(base, "/") || path.Ext(base) != ".yaml" {
		return nil, &fs.PathError{Op: "import", Path: name, Err: fs.ErrNotExist}
	}
	data, err := embedded.ReadFile(file)
	if err != nil {
		return nil, &fs.PathError{Op: "import", Path: name, Err: fs.ErrNotExist}
	}
	return data, nil
}
