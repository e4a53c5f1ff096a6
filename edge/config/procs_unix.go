//go:build unix

package config

// procsAdaptive: procs: adaptive reads the process's CPU time with
// getrusage, which Unix systems give.
const procsAdaptive = true
