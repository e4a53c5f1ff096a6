package edge

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// privilegedPortHint says how to let the edge bind a port below 1024
// without running it as root (docs/operations.md, "Ports below 1024").
const privilegedPortHint = "ports below 1024 need CAP_NET_BIND_SERVICE: under systemd set " +
	"AmbientCapabilities=CAP_NET_BIND_SERVICE in the unit (dist/systemd/edge.service does), or give it to " +
	"the binary with `sudo setcap cap_net_bind_service=+ep $(command -v edge)`; or listen on ports " +
	"from 1024 up behind a balancer"

// bindHint adds privilegedPortHint to err, an error binding addr, when the
// system refused a port below 1024 for want of the privilege (EACCES).
func bindHint(addr string, err error) error {
	if err == nil || !errors.Is(err, syscall.EACCES) {
		return err
	}
	_, p, splitErr := net.SplitHostPort(addr)
	port, convErr := strconv.Atoi(p)
	if splitErr != nil || convErr != nil || port <= 0 || port >= 1024 {
		return err
	}
	return fmt.Errorf("%w (%s)", err, privilegedPortHint)
}
