package policy

import (
	"embed"
	"io/fs"
	"strings"
)

//go:embed default.yaml lists/*.yaml
var embedded embed.FS

// DefaultName is the name errors and Explain give the embedded default
// policy.
const DefaultName = "(builtin)/default.yaml"

// Default compiles the embedded default policy.
func Default() (*Policy, error) {
	data, err := embedded.ReadFile("default.yaml")
	if err != nil {
		return nil, err
	}
	return Parse(DefaultName, data, Options{})
}

// DefaultPolicyYAML returns the text of the embedded default policy, for
// operators who want to start their own from it.
func DefaultPolicyYAML() []byte {
	data, _ := embedded.ReadFile("default.yaml")
	return data
}

// BuiltinLists names the built-in rule lists a policy can import, as
// "(builtin)/name.yaml".
func BuiltinLists() []string {
	ents, _ := fs.ReadDir(embedded, "lists")
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, builtinPrefix+e.Name())
	}
	return names
}

func readBuiltin(name string) ([]byte, error) {
	if strings.Contains(strings.TrimPrefix(name, builtinPrefix), "/") {
		return nil, fs.ErrNotExist
	}
	data, err := embedded.ReadFile(builtinName(name))
	if err != nil {
		return nil, &fs.PathError{Op: "import", Path: name, Err: fs.ErrNotExist}
	}
	return data, nil
}
