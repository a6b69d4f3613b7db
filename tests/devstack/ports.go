package devstack

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. It draws from below the kernel's ephemeral
// range (32768-60999 by default), so no outgoing connection of a server under test can take it before the caller
// binds it; another process's FreePort cannot: each port handed out is locked (a file lock the kernel drops when the
// process ends) for the life of the process, which go test's parallel packages, each starting stacks, need.
func FreePort() (int, error) {
	handedOutMu.Lock()
	defer handedOutMu.Unlock()
	for range 1000 {
		port := portRange[0] + rand.IntN(portRange[1]-portRange[0])
		if handedOut[port] || !lockPort(port) { // never twice to this process, nor to two processes
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // taken
		}
		l.Close()
		handedOut[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("find a free port: 1000 ports below the ephemeral range were taken")
}

var (
	portRange   = [2]int{10000, 32000}
	handedOutMu sync.Mutex
	handedOut   = map[int]bool{}
	portLocks   []*os.File // held open: closing one would drop its port's lock
)

// lockPort takes port's lock file for the rest of the process (its descriptor is never closed), or says it is another's.
func lockPort(port int) bool {
	dir := filepath.Join(os.TempDir(), "captchaflow-devstack-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return true // no shared directory: bar this process only, as before
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return false
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		f.Close()
		return false
	}
	portLocks = append(portLocks, f)
	return true
}

// freePortIfZero returns port, or a free port when it is zero.
func freePortIfZero(port int) (int, error) {
	if port != 0 {
		return port, nil
	}
	return FreePort()
}

// loopback is host:port on 127.0.0.1.
func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
