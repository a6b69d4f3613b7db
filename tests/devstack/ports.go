package devstack

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. It draws from below the kernel's ephemeral
// range (32768-60999 by default), so no outgoing connection of a server under test can take it before the caller
// binds it; another process can, which the stack's readiness checks then report with the component's log.
func FreePort() (int, error) {
	handedOutMu.Lock()
	defer handedOutMu.Unlock()
	for range 1000 {
		port := 10000 + rand.IntN(22000)
		if handedOut[port] { // never twice to this process
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
