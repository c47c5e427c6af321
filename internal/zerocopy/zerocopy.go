// Package zerocopy moves payload bytes between descriptors inside the
// kernel: sendfile from a chunk file to a socket (data servers) and splice
// from one socket to another (forwarding daemons relaying a read), so that
// a byte crossing a daemon is not copied into its memory and out again. It
// owns no connections or files and knows nothing of framing: callers write
// their headers and hold their connections' write locks. Where the
// descriptors do not allow it (not TCP, not a file), it copies instead.
package zerocopy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
)

// zeros pads a send past the end of a file.
var zeros = make([]byte, 64<<10)

// maxSendfile bounds one sendfile call (the kernel's own bound is larger).
const maxSendfile = 1 << 30

// SendFile writes n bytes of f starting at off to dst, the bytes past f's
// end as zeros (a chunk shorter than a read is a hole; a nil f is all
// hole). It does not use or move f's file offset, so several sends may
// share f. If f was closed before any byte went, the error is
// os.ErrClosed; on other errors an unknown number of bytes was written.
func SendFile(dst net.Conn, f *os.File, off int64, n int) error {
	sent := 0
	if f != nil {
		var err error
		if sent, err = sendfile(dst, f, off, n); err != nil {
			return err
		}
	}
	for sent < n {
		k := min(n-sent, len(zeros))
		if _, err := dst.Write(zeros[:k]); err != nil {
			return err
		}
		sent += k
	}
	return nil
}

// sendfile sends up to n bytes from f at off and returns how many it sent;
// fewer than n means f ended.
func sendfile(dst net.Conn, f *os.File, off int64, n int) (int, error) {
	sc, ok := dst.(syscall.Conn)
	if !ok {
		return copyAt(dst, f, off, n)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	fc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	sent := 0
	var serr error
	// Control keeps f's descriptor open (a concurrent Close waits);
	// Write waits for dst to become writable whenever the kernel says
	// EAGAIN.
	cerr := fc.Control(func(ffd uintptr) {
		werr := rc.Write(func(dfd uintptr) bool {
			for sent < n {
				w, err := syscall.Sendfile(int(dfd), int(ffd), &off, min(n-sent, maxSendfile))
				if w > 0 {
					sent += w
				}
				switch {
				case err == syscall.EAGAIN:
					return false
				case err == syscall.EINTR:
					continue
				case err != nil:
					serr = err
					return true
				case w == 0:
					return true // end of file
				}
			}
			return true
		})
		if serr == nil {
			serr = werr
		}
	})
	if cerr != nil {
		// Control fails only for a file closed meanwhile: nothing was
		// sent
		return sent, fmt.Errorf("%w (%v)", os.ErrClosed, cerr)
	}
	if serr != nil {
		return sent, fmt.Errorf("sendfile: %w", serr)
	}
	return sent, nil
}

// copyAt is sendfile's fallback through a buffer.
func copyAt(dst io.Writer, f *os.File, off int64, n int) (int, error) {
	w, err := io.Copy(dst, io.NewSectionReader(f, off, int64(n)))
	return int(w), err
}

// ErrShort is returned when the source ends before the promised bytes.
var ErrShort = errors.New("relay: source ended early")

// Relay writes prefix and then the next n-len(prefix) bytes read from src
// to dst. Between two TCP connections the kernel splices the bytes through
// a pipe without copying them to this process. prefix is what the caller
// had already buffered from src. On error an unknown number of bytes has
// been read and written.
func Relay(dst net.Conn, prefix []byte, src net.Conn, n int) error {
	if len(prefix) > 0 {
		if _, err := dst.Write(prefix); err != nil {
			return err
		}
	}
	rest := int64(n - len(prefix))
	if rest <= 0 {
		return nil
	}
	if done, err := spliceConns(dst, src, rest); done {
		return err
	}
	// not two sockets: io.CopyN copies (or, for TCP to TCP, Go splices)
	w, err := io.CopyN(dst, src, rest)
	if err == io.EOF || (err == nil && w < rest) {
		return ErrShort
	}
	return err
}

// pipes are the relay's kernel buffers, kept empty between relays (a
// channel, not a sync.Pool: a pipe dropped by the collector would leak
// its descriptors).
var pipes = make(chan *pipe, 64)

type pipe struct {
	r, w int
	size int
}

func getPipe() (*pipe, error) {
	select {
	case p := <-pipes:
		return p, nil
	default:
	}
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		return nil, err
	}
	p := &pipe{r: fds[0], w: fds[1], size: 64 << 10}
	// a frame's 1 MiB in one go where the system allows (pipe-max-size)
	if sz, err := fcntl(p.w, syscall.F_SETPIPE_SZ, 1<<20); err == nil {
		p.size = sz
	}
	return p, nil
}

func (p *pipe) close() {
	syscall.Close(p.r)
	syscall.Close(p.w)
}

func fcntl(fd, cmd, arg int) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), uintptr(cmd), uintptr(arg))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// drainTo splices n bytes from the pipe read end r into socket rc,
// waiting while the socket is full. left is what was not moved.
func drainTo(rc syscall.RawConn, r, n int) (left int, err error) {
	left = n
	var serr error
	werr := rc.Write(func(fd uintptr) bool {
		for left > 0 {
			k, err := syscall.Splice(r, nil, int(fd), nil, left, spliceFlags)
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN:
				return false // wait until the socket is writable
			case err != nil:
				serr = fmt.Errorf("splice to socket: %w", err)
				return true
			}
			left -= int(k)
		}
		return true
	})
	if serr == nil {
		serr = werr
	}
	return left, serr
}

// spliceConns moves n bytes from socket src to socket dst through a pipe,
// the pages passed by reference (TCP or unix: Go itself splices only into
// TCP). done is false if either is not a socket (nothing was moved).
func spliceConns(dst, src net.Conn, n int64) (done bool, err error) {
	dc, ok1 := dst.(syscall.Conn)
	sc, ok2 := src.(syscall.Conn)
	if !ok1 || !ok2 {
		return false, nil
	}
	drc, err := dc.SyscallConn()
	if err != nil {
		return false, nil
	}
	src0, err := sc.SyscallConn()
	if err != nil {
		return false, nil
	}
	p, err := getPipe()
	if err != nil {
		return false, nil
	}
	var moved int64
	var serr error
	for moved < n && serr == nil {
		// fill the pipe from src
		inPipe := 0
		rerr := src0.Read(func(fd uintptr) bool {
			for {
				k, err := syscall.Splice(int(fd), nil, p.w, nil, int(min(n-moved, int64(p.size))), spliceFlags)
				switch {
				case err == syscall.EINTR:
					continue
				case err == syscall.EAGAIN:
					return false // wait until src is readable
				case err != nil:
					serr = fmt.Errorf("splice from socket: %w", err)
				case k == 0:
					serr = ErrShort
				default:
					inPipe = int(k)
				}
				return true
			}
		})
		if serr == nil && rerr != nil {
			serr = rerr
		}
		// empty it into dst
		left, werr := drainTo(drc, p.r, inPipe)
		moved += int64(inPipe - left)
		inPipe = left
		if serr == nil && werr != nil {
			serr = werr
		}
		if inPipe > 0 && serr == nil {
			serr = fmt.Errorf("splice to socket: %d bytes left in the pipe", inPipe)
		}
	}
	if serr != nil {
		p.close() // it may hold bytes
		return true, serr
	}
	select {
	case pipes <- p:
	default:
		p.close()
	}
	return true, nil
}

// spliceFlags: move pages rather than copy where the kernel can; the pipe
// never blocks (sockets are non-blocking in Go).
const spliceFlags = 0x1 | 0x2 // SPLICE_F_MOVE | SPLICE_F_NONBLOCK
