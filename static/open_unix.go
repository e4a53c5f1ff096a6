//go:build unix

package static

import "syscall"

// openFlags are added to every open: a FIFO opened without O_NONBLOCK waits
// for a writer. Regular files and directories ignore the flag.
const openFlags = syscall.O_NONBLOCK
