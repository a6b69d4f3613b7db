package devstack

import (
	"bufio"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

const portsChildEnv = "DEVSTACK_PORTS_CHILD"

// TestFreePortNeverHandsAPortToTwoProcesses: go test runs packages as parallel processes, each starting stacks; a port
// one has handed out but whose component has not bound it yet must not reach another.
func TestFreePortNeverHandsAPortToTwoProcesses(t *testing.T) {
	if base := os.Getenv(portsChildEnv); base != "" {
		n, _ := strconv.Atoi(base)
		portRange = [2]int{n, n + 12} // six each from twelve: a collision is near certain unless barred
		for range 6 {
			port, err := FreePort()
			if err != nil {
				t.Fatal(err)
			}
			os.Stdout.WriteString("port " + strconv.Itoa(port) + "\n")
		}
		os.Stdin.Read(make([]byte, 1)) // holds its ports until the parent is done
		return
	}
	child := exec.Command(os.Args[0], "-test.run=^TestFreePortNeverHandsAPortToTwoProcesses$")
	base := portRange[0] + rand.IntN(portRange[1]-portRange[0]-12) // each run of the test its own twelve
	defer func(whole [2]int) { portRange = whole }(portRange)
	portRange = [2]int{base, base + 12}
	child.Env = append(os.Environ(), portsChildEnv+"="+strconv.Itoa(base))
	stdin, _ := child.StdinPipe()
	out, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); child.Wait() })
	childs := map[int]bool{}
	for lines := bufio.NewScanner(out); len(childs) < 6 && lines.Scan(); {
		if p, ok := strings.CutPrefix(lines.Text(), "port "); ok {
			n, _ := strconv.Atoi(p)
			childs[n] = true
		}
	}
	if len(childs) < 6 {
		t.Fatalf("the child process handed out %d ports, want 6", len(childs))
	}
	for range 6 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if childs[port] {
			t.Fatalf("port %d was handed to both processes", port)
		}
	}
}
