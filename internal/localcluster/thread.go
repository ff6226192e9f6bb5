package localcluster

import (
	"runtime"
	"sync"
)

// lockedThread runs functions on one OS thread of its own until close.
//
// Children are started on it because Linux delivers a child's parent-death
// signal when the thread that forked it ends, not the process, and the Go
// runtime ends a thread whenever a goroutine locked to it returns: a child
// forked from an arbitrary goroutine could be killed long before this
// process dies. The thread lives until close, which comes after the
// children it forked have ended; it then ends with its goroutine, so
// anything it forked that is somehow still running is killed.
type lockedThread struct {
	calls     chan func()
	closeOnce sync.Once
}

func startLockedThread() *lockedThread {
	t := &lockedThread{calls: make(chan func())}
	go func() {
		runtime.LockOSThread()
		for fn := range t.calls {
			fn()
		}
	}()
	return t
}

// do runs fn on the thread and returns when fn has.
func (t *lockedThread) do(fn func()) {
	done := make(chan struct{})
	t.calls <- func() {
		defer close(done)
		fn()
	}
	<-done
}

// close ends the thread; later calls do nothing. It must not be called
// before every child started on the thread has ended.
func (t *lockedThread) close() { t.closeOnce.Do(func() { close(t.calls) }) }
