//go:build !unix

package config

// procsAdaptive: without getrusage, procs: adaptive cannot see the CPU
// time it decides by.
const procsAdaptive = false
