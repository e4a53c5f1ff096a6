//go:build !unix

package edge

import "time"

// processCPU is unknown here; the configuration refuses procs: adaptive.
func processCPU() time.Duration { return 0 }
