package edge

import (
	"os"
	"runtime"
	"time"

	"github.com/maatproxy/maat/edge/internal/procs"
)

// startProcs runs the processors' controller (procs: adaptive,
// edge/internal/procs) for as long as the Server serves; while the
// configuration in use says procs: all, it only keeps every processor.
func (s *Server) startProcs() {
	max := runtime.GOMAXPROCS(0)
	_, fromEnv := os.LookupEnv("GOMAXPROCS")
	set := func(n int) {
		if n == max && !fromEnv {
			runtime.SetDefaultGOMAXPROCS() // the runtime's choice again, following the cgroup's quota
			return
		}
		runtime.GOMAXPROCS(n)
	}
	cpu := processCPU
	h := &s.env.hooks
	if h.procsSet != nil {
		set = h.procsSet
	}
	if h.procsCPU != nil {
		cpu = h.procsCPU
	}
	s.procsNow.Store(int32(max))
	l := &procs.Loop{CPU: cpu, Max: max,
		Set: func(n int) {
			set(n)
			s.procsNow.Store(int32(n))
		},
		On: func() bool { return s.handler.Load().cfg.Procs == "adaptive" }}
	s.group.Go("procs", func() error {
		ticks := h.procsTicks
		if ticks == nil {
			t := time.NewTicker(procs.Every)
			defer t.Stop()
			ticks = t.C
		}
		l.Run(s.bg, ticks)
		return nil
	})
}
