package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
)

// Transports. An address names its transport by a URI scheme:
// "tcp://HOST:PORT" (or a bare HOST:PORT) and "unix:PATH" (a socket file)
// or "unix:@NAME" (Linux's abstract namespace). Transports register by
// scheme (RegisterTransport) and every daemon and client listens and dials
// through Listen and Dial.
//
// The local path: a daemon that listens on TCP also listens on a unix
// socket in the abstract namespace named after its TCP address
// (ListenOptions.Local), and a client dialling a TCP address of its own
// host tries that socket first, falling back to TCP. Peers on one host
// then skip TCP/IP (measured: 0.13 CPU-s per GB through a loopback hop
// against 0.31, docs/benchmarks.md) with nothing to configure, while the
// TCP address stays every daemon's name: registration, status, errors and
// the fixed mapping see no difference. An abstract socket belongs to its
// network namespace, as the TCP address does, and goes when its process
// does. Connections over it authenticate like any other.

// Transport makes connections of one kind.
type Transport interface {
	Listen(addr string) (net.Listener, error)
	Dial(ctx context.Context, addr string) (net.Conn, error)
}

var (
	tmu        sync.RWMutex // guards transports
	transports = map[string]Transport{"tcp": tcpTransport{}, "unix": unixTransport{}}
)

// RegisterTransport makes scheme's addresses reachable through t.
func RegisterTransport(scheme string, t Transport) {
	tmu.Lock()
	defer tmu.Unlock()
	transports[scheme] = t
}

// SplitAddr returns an address's transport scheme and the rest ("tcp"
// for an address without one).
func SplitAddr(addr string) (scheme, rest string) {
	if i := strings.Index(addr, ":"); i > 0 {
		s := addr[:i]
		if tr := transportOf(s); tr != nil {
			rest = strings.TrimPrefix(addr[i+1:], "//")
			return s, rest
		}
	}
	return "tcp", addr
}

func transportOf(scheme string) Transport {
	tmu.RLock()
	defer tmu.RUnlock()
	return transports[scheme]
}

// ListenOptions configure Listen.
type ListenOptions struct {
	// Local also listens on the abstract unix socket a client on this
	// host dials instead of a TCP address (see above).
	Local bool
	// Ready, if set, is told the bound address before Listen returns (a
	// daemon publishes it); its error closes the listener.
	Ready func(addr string) error
}

// Listen listens on addr through its transport. The listener's Addr is
// the TCP (or given) address; with opt.Local it also accepts the local
// socket's connections.
func Listen(addr string, opt ListenOptions) (net.Listener, error) {
	ln, err := listen(addr, opt)
	if err != nil || opt.Ready == nil {
		return ln, err
	}
	if err := opt.Ready(ln.Addr().String()); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

func listen(addr string, opt ListenOptions) (net.Listener, error) {
	scheme, rest := SplitAddr(addr)
	tr := transportOf(scheme)
	if tr == nil {
		return nil, fmt.Errorf("rpc: no transport for %q", addr)
	}
	ln, err := tr.Listen(rest)
	if err != nil {
		return nil, err
	}
	if scheme != "tcp" {
		// its address keeps the scheme, for the peers it is given to
		return schemed{ln, scheme}, nil
	}
	if !opt.Local {
		return ln, nil
	}
	local, err := net.Listen("unix", localName(ln.Addr().String()))
	if err != nil {
		// another process of this host holds the name (a daemon on
		// the same port of another address family): TCP only
		return ln, nil
	}
	return mergeListeners(ln, local), nil
}

// Dial connects to addr through its transport; a TCP address of this host
// is tried over its local socket first.
func Dial(ctx context.Context, addr string) (net.Conn, error) {
	scheme, rest := SplitAddr(addr)
	tr := transportOf(scheme)
	if tr == nil {
		return nil, fmt.Errorf("rpc: no transport for %q", addr)
	}
	if scheme == "tcp" {
		if names := localNames(rest); names != nil {
			var d net.Dialer
			for _, n := range names {
				if c, err := d.DialContext(ctx, "unix", n); err == nil {
					tuneLocal(c)
					return c, nil
				}
			}
		}
	}
	return tr.Dial(ctx, rest)
}

// localBuf is a local socket's send and receive buffer: a unix socket's
// default (wmem_default, 208 KiB here) holds a fifth of a 1 MiB frame, so
// sender and receiver would take turns several times per frame, each
// turn a wake-up; TCP on loopback grows its buffers to megabytes.
const localBuf = 4 << 20

func tuneLocal(c net.Conn) {
	if uc, ok := c.(*net.UnixConn); ok {
		uc.SetWriteBuffer(localBuf)
		uc.SetReadBuffer(localBuf)
	}
}

// localName is the abstract socket of a daemon listening on TCP address a
// (a wildcard host listens for every address of the host).
func localName(a string) string {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return "@sluice-tcp/" + a
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "*"
	}
	return "@sluice-tcp/" + net.JoinHostPort(host, port)
}

// localNames are the local sockets to try for TCP address a, or nil if a
// is not an address of this host.
func localNames(a string) []string {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil {
		if host != "localhost" {
			return nil
		}
		ip = net.IPv4(127, 0, 0, 1)
	}
	if !ip.IsLoopback() && !hostHas(ip) {
		return nil
	}
	return []string{localName(a), "@sluice-tcp/" + net.JoinHostPort("*", port)}
}

var (
	hostOnce  sync.Once
	hostAddrs []net.IP // this host's interface addresses, read once
)

func hostHas(ip net.IP) bool {
	hostOnce.Do(func() {
		as, _ := net.InterfaceAddrs()
		for _, a := range as {
			if n, ok := a.(*net.IPNet); ok {
				hostAddrs = append(hostAddrs, n.IP)
			}
		}
	})
	for _, h := range hostAddrs {
		if h.Equal(ip) {
			return true
		}
	}
	return false
}

type tcpTransport struct{}

func (tcpTransport) Listen(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
func (tcpTransport) Dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

type unixTransport struct{}

func (unixTransport) Listen(addr string) (net.Listener, error) { return net.Listen("unix", addr) }
func (unixTransport) Dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", addr)
}

// schemed is a listener whose address names its transport.
type schemed struct {
	net.Listener
	scheme string
}

func (s schemed) Addr() net.Addr { return schemedAddr{s.Listener.Addr(), s.scheme} }

type schemedAddr struct {
	net.Addr
	scheme string
}

func (a schemedAddr) String() string { return a.scheme + ":" + a.Addr.String() }

// merged accepts from several listeners; its Addr is the first's.
type merged struct {
	lns   []net.Listener
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	mu    sync.Mutex // guards err
	err   error      // the first accept error of a listener not closed by Close
}

func mergeListeners(lns ...net.Listener) net.Listener {
	m := &merged{lns: lns, conns: make(chan net.Conn), done: make(chan struct{})}
	for _, ln := range lns {
		go m.accept(ln)
	}
	return m
}

func (m *merged) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			m.mu.Lock()
			if m.err == nil {
				m.err = err
			}
			m.mu.Unlock()
			m.Close()
			return
		}
		tuneLocal(c)
		select {
		case m.conns <- c:
		case <-m.done:
			c.Close()
			return
		}
	}
}

// Accept implements net.Listener.
func (m *merged) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case <-m.done:
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.err != nil && !errors.Is(m.err, net.ErrClosed) {
			return nil, m.err
		}
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener.
func (m *merged) Close() error {
	m.once.Do(func() {
		close(m.done)
		for _, ln := range m.lns {
			ln.Close()
		}
	})
	return nil
}

// Addr implements net.Listener.
func (m *merged) Addr() net.Addr { return m.lns[0].Addr() }

// peerName names a connection's far end for logs: its address, or the
// process of a local socket.
func peerName(c net.Conn) string {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return c.RemoteAddr().String()
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return "local"
	}
	var cred *syscall.Ucred
	rc.Control(func(fd uintptr) {
		cred, _ = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	})
	if cred == nil {
		return "local"
	}
	return fmt.Sprintf("local pid %d", cred.Pid)
}
