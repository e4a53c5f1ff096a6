package policy

import (
	"embed"
	"io/fs"
	"path"
)

//go:embed default.yaml lists/*.yaml lists/*.txt all:anubisdata/data anubisdata/SOURCE anubisdata/LICENSE
var embedded embed.FS

// DefaultName is the name errors and Explain give the embedded default
// policy; a policy file extends the default policy with
// `- import: (builtin)/default.yaml` in its bots:.
const DefaultName = "(builtin)/default.yaml"

// Default compiles the embedded default policy, for an edge without geo
// databases or divert targets.
func Default() (*Policy, error) { return LoadDefault(Options{}) }

// LoadDefault compiles the embedded default policy with opts (Geo says
// which geo databases exist; DivertTargets those of the configuration).
func LoadDefault(opts Options) (*Policy, error) {
	data, err := embedded.ReadFile("default.yaml")
	if err != nil {
		return nil, err
	}
	return Parse(DefaultName, data, opts)
}

// DefaultPolicyYAML returns the text of the embedded default policy, for
// operators who want to start their own from it.
func DefaultPolicyYAML() []byte {
	data, _ := embedded.ReadFile("default.yaml")
	return data
}

// BuiltinLists names the built-in rule lists a policy can import, as
// "(builtin)/name.yaml". (builtin)/default.yaml, the whole default
// policy, can be imported too.
func BuiltinLists() []string {
	ents, _ := fs.ReadDir(embedded, "lists")
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if path.Ext(e.Name()) == ".yaml" {
			names = append(names, builtinPrefix+e.Name())
		}
	}
	return names
}
