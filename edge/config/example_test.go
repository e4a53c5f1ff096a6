package config_test

import (
	"fmt"

	"github.com/maatproxy/maat/edge/config"
)

func ExampleParse() {
	cfg, err := config.Parse("edge.yaml", []byte(`
tls: {mode: self-signed}
sites:
  - hosts: [example.org, www.example.org]
    upstream: http://127.0.0.1:3000
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Sites[0].Upstream[0], cfg.Listen.HTTPS, cfg.Timeouts.Idle.D(), cfg.Validated())

	// Every problem at once, each with the file, the line and the key.
	_, err = config.Parse("edge.yaml", []byte(`
sites:
  - hosts: [example.org]
    upstraem: http://127.0.0.1:3000
limits: {h2_streams: 0}
`))
	for _, p := range config.Problems(err) {
		fmt.Println(p)
	}
	// Output:
	// http://127.0.0.1:3000 :443 2m0s true
	// edge.yaml:4: sites[0].upstraem: unknown key; did you mean upstream?
	// edge.yaml:5: limits.h2_streams: must be at least 1
}
