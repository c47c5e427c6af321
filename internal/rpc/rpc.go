// Package rpc owns sluice's connections: mutual authentication with the
// cluster secret, multiplexing many requests in flight over one TCP
// connection, request timeouts, and reconnection. It moves wire frames and
// never interprets operations; handlers (the daemons) do that.
package rpc

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
)

const (
	helloMagic       = "SLH1"
	nonceLen         = 32
	handshakeTimeout = 5 * time.Second
	// readBufSize holds many small frames per read, while the share of
	// a large payload that lands in it with the frame's head, and is
	// copied once more from there, stays small (at 256 KiB it was up to
	// a quarter of a 1 MiB payload; the rest is read straight into the
	// payload buffer)
	readBufSize = 32 << 10
)

// ErrAuth is returned when the peer does not prove knowledge of the secret.
var ErrAuth = errors.New("rpc: authentication failed")

// Error is a non-zero status returned by the remote handler.
type Error struct {
	Errno syscall.Errno
	Msg   string
}

func (e *Error) Error() string {
	if e.Msg != "" {
		return e.Msg
	}
	return e.Errno.Error()
}

// Unwrap lets errors.Is(err, syscall.ENOENT) work.
func (e *Error) Unwrap() error { return e.Errno }

// Errorf builds an *Error with a formatted message.
func Errorf(errno syscall.Errno, format string, args ...any) *Error {
	return &Error{Errno: errno, Msg: fmt.Sprintf(format, args...)}
}

// TransportError says a server could not be reached or did not answer.
type TransportError struct {
	Server string
	Err    error
}

func (e *TransportError) Error() string { return fmt.Sprintf("server %s: %v", e.Server, e.Err) }

// Unwrap returns the cause.
func (e *TransportError) Unwrap() error { return e.Err }

// Errno maps any error to the errno a file system call should return.
func Errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var re *Error
	if errors.As(err, &re) {
		return re.Errno
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	return syscall.EIO
}

// ToMsg fills the status fields of a response from err.
func ToMsg(m *wire.Msg, err error) *wire.Msg {
	if err != nil {
		m.Errno = uint32(Errno(err))
		m.ErrMsg = err.Error()
	}
	return m
}

// FromMsg returns the error carried by a response, or nil.
func FromMsg(m *wire.Msg) error {
	if m.Errno == 0 {
		return nil
	}
	return &Error{Errno: syscall.Errno(m.Errno), Msg: m.ErrMsg}
}

func mac(secret []byte, label string, a, b []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(label))
	h.Write(a)
	h.Write(b)
	return h.Sum(nil)
}

// serverHandshake authenticates a client: both sides prove they hold the
// secret without sending it.
func serverHandshake(c net.Conn, secret []byte) error {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	sn := make([]byte, nonceLen)
	rand.Read(sn)
	if _, err := c.Write(append([]byte(helloMagic), sn...)); err != nil {
		return err
	}
	in := make([]byte, nonceLen+sha256.Size)
	if _, err := io.ReadFull(c, in); err != nil {
		return err
	}
	cn, proof := in[:nonceLen], in[nonceLen:]
	if !hmac.Equal(proof, mac(secret, "client", sn, cn)) {
		c.Write(rejected[:]) // the client tells a refusal from a server gone
		return ErrAuth
	}
	_, err := c.Write(mac(secret, "server", sn, cn))
	return err
}

func clientHandshake(c net.Conn, secret []byte) error {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	hello := make([]byte, len(helloMagic)+nonceLen)
	if _, err := io.ReadFull(c, hello); err != nil {
		return err
	}
	if string(hello[:len(helloMagic)]) != helloMagic {
		return fmt.Errorf("rpc: not a sluice server")
	}
	sn := hello[len(helloMagic):]
	cn := make([]byte, nonceLen)
	rand.Read(cn)
	if _, err := c.Write(append(cn, mac(secret, "client", sn, cn)...)); err != nil {
		return err
	}
	proof := make([]byte, sha256.Size)
	if _, err := io.ReadFull(c, proof); err != nil {
		// a server that dies (or restarts) in the handshake: worth
		// another try, unlike a refusal
		return fmt.Errorf("rpc: server closed during the handshake: %w", err)
	}
	if hmac.Equal(proof, rejected[:]) {
		return fmt.Errorf("%w (the server refused our proof: wrong cluster secret?)", ErrAuth)
	}
	if !hmac.Equal(proof, mac(secret, "server", sn, cn)) {
		return ErrAuth
	}
	return nil
}

// rejected is what a server sends in place of its proof when the
// client's proof is wrong: an HMAC is never all zeroes.
var rejected [sha256.Size]byte

// frameReader reads frames from a buffered connection.
type frameReader struct {
	r   *bufio.Reader
	hdr [wire.HeaderSize]byte
}

func newFrameReader(c net.Conn) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(c, readBufSize)}
}

// next reads a header and body; the payload is left for the caller.
func (f *frameReader) next() (wire.Header, *wire.Msg, error) {
	if _, err := io.ReadFull(f.r, f.hdr[:]); err != nil {
		return wire.Header{}, nil, err
	}
	h, err := wire.ParseHeader(f.hdr[:])
	if err != nil {
		return h, nil, err
	}
	body := make([]byte, h.BodyLen)
	if _, err := io.ReadFull(f.r, body); err != nil {
		return h, nil, err
	}
	m, err := wire.Decode(body)
	if err != nil {
		return h, nil, err
	}
	return h, m, nil
}

// writeFrame sends one frame with a single writev. The caller serialises
// writes on c.
func writeFrame(c net.Conn, scratch []byte, kind, flags uint8, id uint64, m *wire.Msg, payload []byte) ([]byte, error) {
	scratch = frameHead(scratch, kind, flags, id, m, len(payload))
	if len(payload) == 0 {
		_, err := c.Write(scratch)
		return scratch, err
	}
	bufs := net.Buffers{scratch, payload}
	_, err := bufs.WriteTo(c)
	return scratch, err
}

// frameHead encodes the header and body of a frame whose payload is n
// bytes into scratch.
func frameHead(scratch []byte, kind, flags uint8, id uint64, m *wire.Msg, n int) []byte {
	scratch = append(scratch[:0], make([]byte, wire.HeaderSize)...)
	scratch = m.Append(scratch)
	wire.PutHeader(scratch, wire.Header{Kind: kind, Flags: flags, ReqID: id,
		BodyLen: uint32(len(scratch) - wire.HeaderSize), PayloadLen: uint32(n)})
	return scratch
}

// withTimeout returns ctx bounded by d unless it already has a deadline.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
