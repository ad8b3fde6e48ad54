package e2e

import "syscall"

// procAttr makes the kernel kill the server if the test process dies
// first (a test timeout panics), so no server outlives its test.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
