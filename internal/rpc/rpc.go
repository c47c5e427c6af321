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
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
)

const (
	// helloMagic starts a server's hello, which goes on with the
	// server's protocol version (wire.Version, two big-endian uint16s):
	// kept by every version, so peers of different major versions can
	// name each other's.
	helloMagic       = "SLHV"
	nonceLen         = 32
	versionLen       = 4
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

// ErrVersion is returned when the peer speaks another major version of
// the protocol; the error names both versions.
var ErrVersion = errors.New("rpc: protocol version mismatch")

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

// Unreached reports whether err says the server could not be reached or
// did not answer (a transport failure, or EIO from a relay that could
// not reach its own), rather than that it refused the request: a caller
// may send the request again, or to another server.
func Unreached(err error) bool {
	var te *TransportError
	return errors.As(err, &te) || Errno(err) == syscall.EIO
}

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

func mac(secret []byte, label string, a, b []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(label))
	h.Write(a)
	h.Write(b)
	return h.Sum(nil)
}

func putVersion(b []byte, v wire.Version) []byte {
	b = binary.BigEndian.AppendUint16(b, v.Major)
	return binary.BigEndian.AppendUint16(b, v.Minor)
}

func getVersion(b []byte) wire.Version {
	return wire.Version{Major: binary.BigEndian.Uint16(b), Minor: binary.BigEndian.Uint16(b[2:])}
}

// versionError says that a peer's major version is not ours.
func versionError(who string, theirs wire.Version) error {
	return fmt.Errorf("%w: %s speaks protocol %v, this build %v", ErrVersion, who, theirs, wire.Ours)
}

// serverHandshake authenticates a client and checks its protocol version:
// both sides prove they hold the secret without sending it, each proof
// covering the versions sent, so neither can be altered on the way. It
// returns the client's version.
//
//	server: "SLHV" version nonce
//	client: version nonce proof
//	server: proof (or a refusal: rejected, wrong secret; refusedVersion)
func serverHandshake(c net.Conn, secret []byte) (wire.Version, error) {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	hello := putVersion([]byte(helloMagic), wire.Ours)
	sn := make([]byte, nonceLen)
	rand.Read(sn)
	hello = append(hello, sn...)
	if _, err := c.Write(hello); err != nil {
		return wire.Version{}, err
	}
	in := make([]byte, versionLen+nonceLen+sha256.Size)
	if _, err := io.ReadFull(c, in); err != nil {
		return wire.Version{}, err
	}
	theirs := getVersion(in)
	cn, proof := in[:versionLen+nonceLen], in[versionLen+nonceLen:]
	if !hmac.Equal(proof, mac(secret, "client", hello[len(helloMagic):], cn)) {
		c.Write(rejected[:]) // the client tells a refusal from a server gone
		return theirs, ErrAuth
	}
	if theirs.Major != wire.Major {
		c.Write(refusedVersion[:])
		return theirs, versionError("the client", theirs)
	}
	_, err := c.Write(mac(secret, "server", hello[len(helloMagic):], cn))
	return theirs, err
}

func clientHandshake(c net.Conn, secret []byte) error {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	hello := make([]byte, len(helloMagic)+versionLen+nonceLen)
	if _, err := io.ReadFull(c, hello[:len(helloMagic)]); err != nil {
		return err
	}
	switch string(hello[:len(helloMagic)]) {
	case helloMagic:
	case "SLH1": // the hello of protocol 1, which had no version
		return versionError("the server", wire.Version{Major: 1})
	default:
		return fmt.Errorf("rpc: not a sluice server")
	}
	if _, err := io.ReadFull(c, hello[len(helloMagic):]); err != nil {
		return err
	}
	theirs := getVersion(hello[len(helloMagic):])
	if theirs.Major != wire.Major {
		return versionError("the server", theirs)
	}
	sv := hello[len(helloMagic):] // the server's version and nonce
	cn := putVersion(nil, wire.Ours)
	nonce := make([]byte, nonceLen)
	rand.Read(nonce)
	cn = append(cn, nonce...)
	if _, err := c.Write(append(cn, mac(secret, "client", sv, cn)...)); err != nil {
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
	if hmac.Equal(proof, refusedVersion[:]) {
		return versionError("the server", theirs)
	}
	if !hmac.Equal(proof, mac(secret, "server", sv, cn)) {
		return ErrAuth
	}
	return nil
}

// rejected is what a server sends in place of its proof when the
// client's proof is wrong, refusedVersion when the client's major version
// is not its own: an HMAC is never all zeroes or all ones.
var (
	rejected       [sha256.Size]byte
	refusedVersion = [sha256.Size]byte{0: 0xff, 31: 0xff}
)

// frameReader reads frames from a buffered connection.
type frameReader struct {
	r   *bufio.Reader
	hdr [wire.HeaderSize]byte
}

func newFrameReader(c net.Conn) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(c, readBufSize)}
}

// next reads a header and body (still encoded); the payload is left for
// the caller.
func (f *frameReader) next() (wire.Header, []byte, error) {
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
	return h, body, nil
}

// writeFrame sends one frame with a single writev. The caller serialises
// writes on c. stall is as for writeAll.
func writeFrame(c net.Conn, scratch []byte, h wire.Header, m wire.Message, payload []byte, stall time.Duration) ([]byte, error) {
	scratch = frameHead(scratch, h, m, len(payload))
	bufs := net.Buffers{scratch}
	if len(payload) > 0 {
		bufs = append(bufs, payload)
	}
	return scratch, writeAll(c, bufs, stall)
}

// writeAll writes bufs to c: one buffer with write (which, unlike
// writev, the race detector sees as a synchronising event: a test that
// checks what a handler did before it replied relies on it), several in
// writevs. With stall > 0 it fails once a write made no progress for
// stall (a peer that reads no more); with 0 it waits as long as c does.
func writeAll(c net.Conn, bufs net.Buffers, stall time.Duration) error {
	write := func() (int64, error) {
		if len(bufs) == 1 {
			n, err := c.Write(bufs[0])
			bufs[0] = bufs[0][n:]
			return int64(n), err
		}
		return bufs.WriteTo(c) // consumes what it wrote
	}
	if stall <= 0 {
		_, err := write()
		return err
	}
	defer c.SetWriteDeadline(time.Time{})
	for {
		c.SetWriteDeadline(time.Now().Add(stall))
		n, err := write()
		if err == nil || n == 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
	}
}

// frameHead encodes the header and body (m, nil: none) of a frame whose
// payload is n bytes into scratch.
func frameHead(scratch []byte, h wire.Header, m wire.Message, n int) []byte {
	scratch = append(scratch[:0], make([]byte, wire.HeaderSize)...)
	if m != nil {
		scratch = wire.Encode(scratch, m)
	}
	h.BodyLen, h.PayloadLen = uint32(len(scratch)-wire.HeaderSize), uint32(n)
	wire.PutHeader(scratch, h)
	return scratch
}

// replyBody returns the frame flags and body of an answer: an error goes
// as a Status.
func replyBody(m wire.Message, err error) (uint8, wire.Message) {
	if err != nil {
		return wire.FlagError, &wire.Status{Errno: uint32(Errno(err)), Msg: err.Error()}
	}
	return 0, m
}

// withTimeout returns ctx bounded by d unless it already has a deadline.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
