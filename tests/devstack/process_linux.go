package devstack

import "syscall"

// processAttrs puts the child in its own process group (so Stop reaches its children too, and a terminal's Ctrl-C
// reaches only us, who then stop it in order) and has the kernel kill it if we die without cleaning up.
func processAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
