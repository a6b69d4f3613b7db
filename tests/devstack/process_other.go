//go:build unix && !linux

package devstack

import "syscall"

// processAttrs puts the child in its own process group, so Stop reaches its children too and a terminal's Ctrl-C
// reaches only us, who then stop it in order.
func processAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
