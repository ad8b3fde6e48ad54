package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuUse is the CPU time a load took: on the whole machine (every
// process: this one, PostgreSQL, DBOS's, the kernel's work for them), and
// in this process (the engine, DBOS or pgx, and the harness's Go code).
type cpuUse struct {
	machine, self time.Duration
}

// measureCPU makes n operations of c and returns the CPU time an
// operation took.
func measureCPU(ctx context.Context, c contender, n int) (cpuUse, error) {
	m0, s0 := machineCPU(), selfCPU()
	if _, err := c.run(ctx, n); err != nil {
		return cpuUse{}, err
	}
	m1, s1 := machineCPU(), selfCPU()
	return cpuUse{machine: (m1 - m0) / time.Duration(n), self: (s1 - s0) / time.Duration(n)}, nil
}

// machineCPU is the busy time of every CPU since boot, from /proc/stat:
// user, nice, system, irq, softirq and steal (not idle or iowait).
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		if i < len(f) {
			n, _ := strconv.ParseInt(f[i], 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// selfCPU is this process's user and system time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
