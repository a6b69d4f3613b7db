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
// Linux, exited) are left out.
func cpuSeconds(pids map[string]int) map[string]float64 {
	out := map[string]float64{}
	for name, pid := range pids {
		if s, err := procCPU(pid); err == nil {
			out[name] = s
		}
	}
	return out
}

func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after its closing parenthesis are fixed.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
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
	total map[string]float64
}

func newCPUMeter(pids func() map[string]int) *cpuMeter {
	return &cpuMeter{pids: pids, total: map[string]float64{}}
}

// measure runs f and adds the CPU each process used meanwhile.
func (m *cpuMeter) measure(f func()) {
	pids := m.pids()
	before := cpuSeconds(pids)
	f()
	after := cpuSeconds(pids)
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
