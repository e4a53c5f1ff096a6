package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/maatproxy/maat/cmd/edge/internal/ops"
	"github.com/maatproxy/maat/edge/config"
)

// defaultConfig is the configuration file the Debian package installs.
const defaultConfig = "/etc/edge/edge.yaml"

func trustCommand() *command {
	return &command{
		name: "trust", args: "[FILE]", maxArgs: 1, summary: "Print or install the local CA of tls.mode: self-signed",
		doc: `Prints, in PEM, the local CA certificate that signs the edge's certificates in
tls.mode: self-signed, as kept in tls.cache of FILE (or -config FILE;
default ` + defaultConfig + `). Trust it in a browser or a client to
reach the edge without warnings. With -install, adds it to the system's
trust store (Debian: /usr/local/share/ca-certificates and
update-ca-certificates; Fedora: update-ca-trust), which needs root. The CA
exists once the edge has started with that tls.cache.`,
		flags: func(fs *flag.FlagSet) func(context.Context, stdio, []string) error {
			cfgFlag := fs.String("config", "", "configuration file (YAML); the same as the FILE argument")
			install := fs.Bool("install", false, "install into the system's trust store (root)")
			root := fs.String("root", "", "with -install: install into the system tree under this directory (an image being built)")
			return func(ctx context.Context, s stdio, args []string) error {
				path, err := configArg("trust", *cfgFlag, args, defaultConfig)
				if err != nil {
					return err
				}
				if *root != "" && !*install {
					return usageError("trust", "-root goes with -install")
				}
				if *install {
					if err := ops.CanInstallCA(*root); err != nil {
						return err
					}
				}
				cfg, err := config.Load(path)
				if err != nil {
					return err
				}
				pem, err := ops.LocalCA(&cfg)
				if err != nil {
					return err
				}
				if !*install {
					_, err := s.out.Write(pem)
					return err
				}
				did, err := ops.InstallCA(ctx, pem, *root)
				if err != nil {
					return err
				}
				fmt.Fprintln(s.out, did)
				return nil
			}
		},
	}
}
