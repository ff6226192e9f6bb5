package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
)

// BuildOperator builds the operator binary (the top-level main package)
// into dir and returns its path. The Go build cache makes repeated builds
// cheap.
func BuildOperator(ctx context.Context, dir string) (string, error) {
	// Absolute, since the build runs in the repository's root.
	bin, err := filepath.Abs(filepath.Join(dir, "profile-scheduler"))
	if err != nil {
		return "", err
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Dir = RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the operator: %w\n%s", err, out)
	}
	return bin, nil
}

// Process is a binary a harness started (an operator replica,
// kube-scheduler) that dies with the harness, even when the harness is
// killed.
type Process struct {
	// Name names the process in errors.
	Name string
	// Log is the file its stdout and stderr are appended to.
	Log string

	cmd  *exec.Cmd
	done chan struct{}
	// err and exitedAt are written before done is closed.
	err      error
	exitedAt time.Time
}

// StartProcess starts bin with args, appending its output to log. The
// process is started from a goroutine locked to its OS thread that lives
// as long as the process: Linux sends the parent-death signal when the
// thread that forked the child ends, and the Go runtime may end any
// thread, so only a thread held for the child's whole life makes "dies
// with this harness, even on SIGKILL" hold.
func StartProcess(name, bin, log string, args ...string) (*Process, error) {
	out, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so a Ctrl-C reaches the harness alone, which
	// then stops the process itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &Process{Name: name, Log: log, cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the child
		defer close(p.done)
		defer func() { _ = out.Close() }()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		p.exitedAt = time.Now()
	}()
	if err := <-started; err != nil {
		<-p.done
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	return p, nil
}

// Pid is the process's ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is how the process exited, once Done is closed.
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// ExitedAt is when the process was seen to exit, once Done is closed.
func (p *Process) ExitedAt() time.Time {
	<-p.done
	return p.exitedAt
}

// Running tells whether the process has not exited.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Signal sends sig to the process, such as SIGSTOP and SIGCONT to pause
// and resume it.
func (p *Process) Signal(sig os.Signal) error {
	if !p.Running() {
		return fmt.Errorf("%s is not running", p.Name)
	}
	return p.cmd.Process.Signal(sig)
}

// Kill sends SIGKILL, as a crashed node or an OOM kill would end the
// process: no graceful shutdown. It returns once the process is gone.
func (p *Process) Kill() error {
	if !p.Running() {
		return fmt.Errorf("%s is not running", p.Name)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-p.done
	return nil
}

// Stop sends SIGTERM, waits for the process to exit and kills it if it has
// not after timeout. Stopping a stopped process does nothing.
func (p *Process) Stop(timeout time.Duration) error {
	if !p.Running() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%s did not stop within %v of SIGTERM; killed it", p.Name, timeout)
	}
}
