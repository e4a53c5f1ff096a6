// Package testredis runs a real redis-server (or valkey-server) for tests:
// on a loopback port, without persistence, and under the test's control: it
// can be paused (SIGSTOP), killed and started again on the same port, as
// an operator's Redis is when a machine stalls or a process dies.
//
// Tests that use it need the program (internal/testenv.NeedCommand: skipped
// without it, failed with CI=true); `make test` installs it.
package testredis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/maatproxy/maat/internal/testenv"
)

// startTimeout bounds the wait for a started server to answer.
const startTimeout = 5 * time.Second

// Server is a redis-server on a loopback port, without persistence, that a
// test can pause, kill and start again on the same port.
type Server struct {
	t    testing.TB
	bin  string
	port int
	dir  string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start starts a redis-server on a free loopback port; it is killed when
// the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, bin: testenv.NeedCommand(t, "redis-server", "valkey-server"), dir: t.TempDir()}
	t.Cleanup(s.Kill)
	for attempt := 0; ; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s.port = l.Addr().(*net.TCPAddr).Port
		l.Close()
		err = s.Restart()
		if err == nil {
			return s
		}
		if attempt == 4 {
			t.Fatalf("starting %s: %v", s.bin, err)
		}
	}
}

// Addr is the server's address, host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the server's database 0 as the edge's store.url reads it.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Restart starts the server on its port, after Kill (Start calls it the
// first time). The port was free when chosen, but another test (of this
// package or another) may take it before the server binds it, so the
// server that answers must prove to be ours by its process id.
func (s *Server) Restart() error {
	cmd := exec.Command(s.bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--loglevel", "warning")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-exited:
			return fmt.Errorf("exited: %s", out.String())
		default:
		}
		if c, err := net.Dial("tcp", s.Addr()); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("not listening after %v", startTimeout)
		}
		time.Sleep(20 * time.Millisecond) // polling, bounded by the deadline
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	info, err := c.Info(ctx, "server").Result()
	if want := fmt.Sprintf("process_id:%d\r\n", cmd.Process.Pid); err != nil || !strings.Contains(info, want) {
		s.Kill()
		return errors.Join(fmt.Errorf("the server on %s is not ours", s.Addr()), err)
	}
	return nil
}

// Kill kills the server (SIGKILL, also when it is paused) and waits for it
// to exit; its data is lost.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd != nil {
		cmd.Process.Kill()
		<-exited
	}
}

// Signal sends sig to the server: SIGSTOP pauses it (its connections stay
// open and nothing answers), SIGCONT resumes it.
func (s *Server) Signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Fatalf("signal %v: the server is not running", sig)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
}

// Client returns a go-redis client of the server, closed when the test
// ends: for a test to look at or change what the nodes share.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	s.t.Cleanup(func() { c.Close() })
	return c
}
