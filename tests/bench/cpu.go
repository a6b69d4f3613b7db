package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat (100 on every Linux we run on).
const clockTicks = 100

// cpuSeconds reads the user+system CPU time of each process, in seconds; processes that cannot be read (not
// Linux, exited) are left out. Names in trees count the process and all its descendants (PostgreSQL's backends).
func cpuSeconds(pids map[string]int, trees map[string]bool) map[string]float64 {
	out := map[string]float64{}
	var children map[int][]int
	for name, pid := range pids {
		if !trees[name] {
			if s, err := procCPU(pid); err == nil {
				out[name] = s
			}
			continue
		}
		if children == nil {
			children = processChildren()
		}
		total, ok := 0.0, false
		for stack := []int{pid}; len(stack) > 0; {
			p := stack[len(stack)-1]
			stack = append(stack[:len(stack)-1], children[p]...)
			if s, err := procCPU(p); err == nil {
				total, ok = total+s, true
			}
		}
		if ok {
			out[name] = total
		}
	}
	return out
}

// processChildren maps each process to its children.
func processChildren() map[int][]int {
	out := map[int][]int{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, err := procPPID(pid); err == nil {
			out[ppid] = append(out[ppid], pid)
		}
	}
	return out
}

func procPPID(pid int) (int, error) {
	f, err := procStatFields(pid)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(f[1]) // field 4
}

// procStatFields are the fields of /proc/<pid>/stat after the command name: f[0] is field 3 (state).
func procStatFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	// The command name (field 2) may hold spaces; the fields after its closing parenthesis are fixed.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return nil, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return f, nil
}

func procCPU(pid int) (float64, error) {
	f, err := procStatFields(pid)
	if err != nil {
		return 0, err
	}
	utime, err1 := strconv.ParseFloat(f[11], 64) // field 14
	stime, err2 := strconv.ParseFloat(f[12], 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return (utime + stime) / clockTicks, nil
}

// cpuMeter accumulates the CPU each process used over measured segments.
type cpuMeter struct {
	pids  func() map[string]int
	trees map[string]bool
	total map[string]float64
}

func newCPUMeter(pids func() map[string]int, trees map[string]bool) *cpuMeter {
	return &cpuMeter{pids: pids, trees: trees, total: map[string]float64{}}
}

// measure runs f and adds the CPU each process used meanwhile.
func (m *cpuMeter) measure(f func()) {
	pids := m.pids()
	before := cpuSeconds(pids, m.trees)
	f()
	after := cpuSeconds(pids, m.trees)
	for name, a := range after {
		if b, ok := before[name]; ok {
			m.total[name] += a - b
		}
	}
}

// perTask is the CPU milliseconds per task of each process.
func (m *cpuMeter) perTask(tasks int) map[string]float64 {
	out := map[string]float64{}
	for name, s := range m.total {
		out[name] = round2(s * 1000 / float64(max(tasks, 1)))
	}
	return out
}

// processPIDs names the processes whose CPU is counted: the stack's, this one's, and an external server's.
func (b *bench) processPIDs() map[string]int {
	m := b.st.PIDs()
	m["bench"] = os.Getpid()
	// An external server's processes, named on the command line (e.g. by bench/cluster.sh).
	for name, pidFile := range b.cfg.serverPIDs {
		if pid, err := readPIDFile(pidFile); err == nil {
			m[name] = pid
			b.pidTrees[name] = true
		}
	}
	return m
}

// readPIDFile reads a pid file's first line (PostgreSQL's postmaster.pid has more).
func readPIDFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
}
