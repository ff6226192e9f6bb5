package faults

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echoServer answers each line with the same line until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line on c and reads the answer.
func roundTrip(c net.Conn, r *bufio.Reader) error {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	_, err := r.ReadString('\n')
	return err
}

func TestProxyDropAndRestore(t *testing.T) {
	p, err := newProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()

	c, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	r := bufio.NewReader(c)
	if err := roundTrip(c, r); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}

	if n := p.drop(); n != 1 {
		t.Errorf("drop reset %d client connections, want 1", n)
	}
	if err := roundTrip(c, r); err == nil {
		t.Errorf("a connection the proxy dropped still carried bytes")
	}
	// While cut, a new connection is reset, before or after the dial
	// returns.
	if cut, err := net.Dial("tcp", p.addr()); err == nil {
		if err := roundTrip(cut, bufio.NewReader(cut)); err == nil {
			t.Errorf("a connection made while cut carried bytes")
		}
		_ = cut.Close()
	}

	p.restore()
	again, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = again.Close() }()
	if err := roundTrip(again, bufio.NewReader(again)); err != nil {
		t.Errorf("after restore: %v", err)
	}
}
