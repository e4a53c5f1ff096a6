package edge

// TRANSITION (issue #32): the configuration moved to package edge/config.
// The aliases and forwarders below keep the edge files of other rooms, and
// the users of edge.Config and its kin (cmd/edge, fuzz/, bench/), compiling
// unchanged while the rooms work in parallel. The lead removes this file
// once every room has merged; its users then name package config.

import (
	"net/url"

	"github.com/maatproxy/maat/edge/config"
)

// The configuration's types: see package config.
type (
	Config          = config.Config
	Listen          = config.Listen
	TLSConfig       = config.TLSConfig
	ACMEConfig      = config.ACMEConfig
	Site            = config.Site
	AccessLog       = config.AccessLog
	Route           = config.Route
	Redirect        = config.Redirect
	HSTS            = config.HSTS
	HeaderRules     = config.HeaderRules
	HeaderOps       = config.HeaderOps
	BasicAuth       = config.BasicAuth
	UpstreamTLS     = config.UpstreamTLS
	Upstreams       = config.Upstreams
	ChallengeConfig = config.ChallengeConfig
	WaitConfig      = config.WaitConfig
	GeoConfig       = config.GeoConfig
	DivertTarget    = config.DivertTarget
	StoreConfig     = config.StoreConfig
	LogConfig       = config.LogConfig
	Fingerprints    = config.Fingerprints
	Timeouts        = config.Timeouts
	Limits          = config.Limits
	Duration        = config.Duration
	Prefix          = config.Prefix
	ConfigError     = config.Error
)

// The fingerprint log's default and off switch: see package config.
const (
	DefaultFingerprintLog = config.DefaultFingerprintLog
	FingerprintsOff       = config.FingerprintsOff
)

// ErrConfig is config.ErrInvalid.
var ErrConfig = config.ErrInvalid

// DefaultConfig is config.Default.
func DefaultConfig() Config { return config.Default() }

// LoadConfig is config.Load.
func LoadConfig(path string) (Config, error) { return config.Load(path) }

// ParseConfig is config.Parse.
func ParseConfig(name string, data []byte) (Config, error) { return config.Parse(name, data) }

func readConfig(path string) (Config, error)   { return config.Read(path) }
func flattenErrors(err error) []error          { return config.Problems(err) }
func sortedByLine(errs []error) error          { return config.SortByLine(errs) }
func keysOverlap(a, b string) bool             { return config.KeysOverlap(a, b) }
func normalizeHost(h string) string            { return config.NormalizeHost(h) }
func parseUpstream(s string) (*url.URL, error) { return config.ParseUpstream(s) }
func unixSocket(addr string) (string, bool)    { return config.UnixSocket(addr) }
