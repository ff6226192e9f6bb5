package main

import (
	"fmt"
	"os"
	"syscall"
)

// init asks Linux for SIGTERM when the process that started this one ends,
// even by SIGKILL: `make run-local` killed outright, or the shell of a
// closed terminal. The run then stops as on Ctrl-C, control plane
// included, instead of serving on without anyone to stop it.
//
// The signal is armed per thread and lost when the arming thread ends.
// Package initialisation runs on the main thread, which the Go runtime
// never ends.
func init() {
	parent := os.Getppid()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0); errno != 0 {
		fmt.Fprintf(os.Stderr, "profile-scheduler-local: arming the parent-death signal: %v\n", errno)
		os.Exit(1)
	}
	// The parent may have ended before the signal was armed; nothing would
	// then ever stop this run.
	if os.Getppid() != parent {
		os.Exit(1)
	}
}
