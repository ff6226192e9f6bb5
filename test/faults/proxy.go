package faults

import (
	"errors"
	"io"
	"net"
	"sync"
)

// proxy forwards TCP connections from a loopback port to the API server,
// and can cut them, as a partition or a restarted load balancer would,
// without the privileges that iptables or network namespaces need. It
// forwards bytes only: TLS runs end to end between the client and the API
// server.
type proxy struct {
	target string
	ln     net.Listener

	// mu guards conns and cut; a connection is added under mu only while
	// not cut, so cutting closes every connection that could carry bytes.
	mu sync.Mutex
	// conns maps each open connection to whether it is a client's.
	conns map[net.Conn]bool
	cut   bool
	wg    sync.WaitGroup
}

// newProxy listens on a free loopback port and forwards to target.
func newProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{target: target, ln: ln, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// addr is the proxy's host:port.
func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.forward(client)
		}()
	}
}

func (p *proxy) forward(client net.Conn) {
	if !p.track(client, true) {
		reset(client)
		return
	}
	defer p.untrackAndClose(client)
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(server, false) {
		reset(server)
		return
	}
	defer p.untrackAndClose(server)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	// Either side ending ends both: the deferred closes unblock the other copy.
	<-done
}

// track adds c to the open connections unless the proxy is cut.
func (p *proxy) track(c net.Conn, client bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = client
	return true
}

func (p *proxy) untrackAndClose(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

// reset closes c with a TCP reset, as a peer that dropped the connection.
func reset(c net.Conn) {
	if tcp, ok := c.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = c.Close()
}

// drop resets every open connection and refuses new ones until restore,
// and returns how many clients' connections it reset.
func (p *proxy) drop() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	n := 0
	for c, client := range p.conns {
		reset(c)
		if client {
			n++
		}
	}
	return n
}

// restore accepts and forwards connections again.
func (p *proxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// close stops listening, resets every connection and waits for the
// proxy's goroutines.
func (p *proxy) close() {
	_ = p.ln.Close()
	p.drop()
	p.wg.Wait()
}
