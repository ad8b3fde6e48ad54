//go:build !linux

package e2e

import "syscall"

// procAttr has nothing to add where there is no parent-death signal;
// t.Cleanup kills the server.
func procAttr() *syscall.SysProcAttr { return nil }
