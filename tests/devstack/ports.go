package devstack

import (
	"fmt"
	"net"
	"strconv"
	"sync"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. Another process can take it before the
// caller binds it; the stack's readiness checks then fail with the component's log, which says so.
func FreePort() (int, error) {
	handedOutMu.Lock()
	defer handedOutMu.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !handedOut[port] { // the kernel hands a just-closed port out again: never twice to this process
			handedOut[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("find a free port: every port offered was already handed out")
}

var (
	handedOutMu sync.Mutex
	handedOut   = map[int]bool{}
)

// freePortIfZero returns port, or a free port when it is zero.
func freePortIfZero(port int) (int, error) {
	if port != 0 {
		return port, nil
	}
	return FreePort()
}

// loopback is host:port on 127.0.0.1.
func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
