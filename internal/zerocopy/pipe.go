package zerocopy

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Pipe holds a payload in the kernel: the bytes of a request received
// from a socket without copying them into the process (pipes hold
// references to the socket's pages), sent on to sockets or written into
// files any number of times, each time without a copy through the process
// (tee, splice). A forwarding daemon relays a write this way and can still
// send it again, to another server or after a reconnection.
//
// A pipe holds a number of pages, and a socket's bytes come in pieces
// that need not fill them (the head of a buffer, a frame's start), so a
// 1 MiB payload may take a little more than a 1 MiB pipe: a Pipe is a
// chain of pipes, another taken when one is full.
//
// A Pipe is used by one owner; SendTo, WriteToFile and ReadAt may run
// concurrently (each tees into a pipe of its own), Release after all.
type Pipe struct {
	segs []seg
	n    int // bytes held
	// kept is set once a send of the payload failed after the pages went
	// out (a socket's queue may still hold them): see MarkKept.
	kept atomic.Bool
}

// MarkKept notes that references to the payload's pages may outlive the
// request: a send of them failed after they went out, and the peer's
// queue may still hold them. The server answers with wire.FlagPagesKept,
// so that a client that sent the pages by reference detaches them.
func (p *Pipe) MarkKept() { p.kept.Store(true) }

// Kept reports whether MarkKept was called.
func (p *Pipe) Kept() bool { return p.kept.Load() }

// seg is one pipe of the chain and the bytes it holds.
type seg struct {
	p *pipe
	n int
}

// ErrPipeFull says a payload did not fit the pipes a Pipe may chain: the
// caller reads it into memory instead.
var ErrPipeFull = errors.New("zerocopy: payload does not fit its pipes")

// maxSegs bounds a Pipe's chain.
const maxSegs = 4

// bigPipe is the capacity asked for a payload pipe (more than
// pipe-max-size, 1 MiB by default, needs CAP_SYS_RESOURCE; a pipe that
// gets less is chained). A variable for tests.
var bigPipe = 2 << 20

var (
	bigPipes = make(chan *pipe, 64) // empty payload pipes
	nullOnce sync.Once
	nullFD   = -1 // /dev/null, where bytes to skip are spliced
)

func getBigPipe() (*pipe, error) {
	select {
	case p := <-bigPipes:
		return p, nil
	default:
	}
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		return nil, err
	}
	p := &pipe{r: fds[0], w: fds[1], size: 64 << 10}
	for _, sz := range []int{bigPipe, min(bigPipe, 1<<20)} {
		if got, err := fcntl(p.w, syscall.F_SETPIPE_SZ, sz); err == nil {
			p.size = got
			break
		}
	}
	return p, nil
}

func putBigPipe(p *pipe) {
	select {
	case bigPipes <- p:
	default:
		p.close()
	}
}

// BigPipes reports whether a payload pipe holds more than a 1 MiB payload
// and a reply's header behind it (F_SETPIPE_SZ beyond pipe-max-size needs
// CAP_SYS_RESOURCE): SpliceReply then takes 1 MiB reads whole.
func BigPipes() bool {
	p, err := getBigPipe()
	if err != nil {
		return false
	}
	defer putBigPipe(p)
	return p.size > 1<<20
}

// NewPipe returns an empty Pipe for a payload of n bytes, or nil if the
// system's pipes are too small for it (or no pipe can be had).
func NewPipe(n int) *Pipe {
	p, err := getBigPipe()
	if err != nil {
		return nil
	}
	if p.size*(maxSegs-1) < n {
		putBigPipe(p)
		return nil
	}
	return &Pipe{segs: []seg{{p: p}}}
}

// Len is the number of bytes held.
func (p *Pipe) Len() int { return p.n }

// Single reports whether the bytes held are in one pipe.
func (p *Pipe) Single() bool { return len(p.segs) <= 1 }

// Fill moves n bytes into the pipe: prefix (bytes of the payload already
// read from src) copied, the rest spliced from socket src. On an error
// the pipe is unusable (Release it); with ErrPipeFull, the bytes moved so
// far can be read back with ReadAt(b[:p.Len()], 0) and the rest is still
// in src.
func (p *Pipe) Fill(prefix []byte, src net.Conn, n int) error {
	for len(prefix) > 0 {
		cur := &p.segs[len(p.segs)-1]
		k, err := syscall.Write(cur.p.w, prefix)
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EAGAIN {
			if err := p.grow(); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("zerocopy: filling a pipe: %w", err)
		}
		prefix = prefix[k:]
		cur.n += k
		p.n += k
	}
	if p.n >= n {
		return nil
	}
	rc, err := rawConn(src)
	if err != nil {
		return err
	}
	var serr error
	for p.n < n && serr == nil {
		rerr := rc.Read(func(fd uintptr) bool {
			for p.n < n {
				cur := &p.segs[len(p.segs)-1]
				k, err := syscall.Splice(int(fd), nil, cur.p.w, nil, n-p.n, spliceFlags)
				switch {
				case err == syscall.EINTR:
					continue
				case err == syscall.EAGAIN:
					if cur.p.full() {
						if serr = p.grow(); serr == nil {
							continue
						}
						return true
					}
					return false // wait until src is readable
				case err != nil:
					serr = fmt.Errorf("splice from socket: %w", err)
				case k == 0:
					serr = ErrShort
				default:
					cur.n += int(k)
					p.n += int(k)
					continue
				}
				return true
			}
			return true
		})
		if serr == nil && rerr != nil {
			serr = rerr
		}
	}
	return serr
}

// grow chains another pipe.
func (p *Pipe) grow() error {
	if len(p.segs) >= maxSegs {
		return ErrPipeFull
	}
	q, err := getBigPipe()
	if err != nil {
		return ErrPipeFull
	}
	p.segs = append(p.segs, seg{p: q})
	return nil
}

// full reports whether the pipe has no slot left, so that a splice into
// it would wait forever (an EAGAIN from a splice says only that one end
// or the other would block): a pipe polls writable while it has one.
func (p *pipe) full() bool {
	fds := []unix.PollFd{{Fd: int32(p.w), Events: unix.POLLOUT}}
	for {
		n, err := unix.Poll(fds, 0)
		if err == syscall.EINTR {
			continue
		}
		return err == nil && n == 0
	}
}

// each calls fn with a pipe of its own holding bytes [off, off+n) of
// the payload, one segment's part at a time, and returns that pipe to the
// pool once fn has emptied it.
func (p *Pipe) each(off, n int, fn func(q *pipe, k int) error) error {
	if off < 0 || n < 0 || off+n > p.n {
		return fmt.Errorf("zerocopy: bytes %d+%d of a pipe of %d", off, n, p.n)
	}
	for _, sg := range p.segs {
		if n == 0 {
			break
		}
		if off >= sg.n {
			off -= sg.n
			continue
		}
		k := min(n, sg.n-off)
		q, err := getBigPipe()
		if err != nil {
			return err
		}
		t, err := teeAll(sg.p.r, q.w, off+k)
		if err == nil && t != off+k {
			err = fmt.Errorf("zerocopy: tee duplicated %d of %d bytes", t, off+k)
		}
		if err == nil && off > 0 {
			err = skip(q, off)
		}
		if err == nil {
			err = fn(q, k)
		}
		if err != nil {
			q.close() // it may hold bytes
			return err
		}
		putBigPipe(q)
		off, n = 0, n-k
	}
	return nil
}

func teeAll(in, out, n int) (int, error) {
	for {
		k, err := syscall.Tee(in, out, n, spliceFlags&^0x1)
		if err == syscall.EINTR {
			continue
		}
		return int(k), err
	}
}

// skip drops the first n bytes of q (spliced to /dev/null: no copy).
func skip(q *pipe, n int) error {
	nullOnce.Do(func() {
		if fd, err := syscall.Open(os.DevNull, syscall.O_WRONLY|syscall.O_CLOEXEC, 0); err == nil {
			nullFD = fd
		}
	})
	for n > 0 {
		var k int64
		var err error
		if nullFD >= 0 {
			k, err = syscall.Splice(q.r, nil, nullFD, nil, n, spliceFlags)
		} else {
			buf := make([]byte, min(n, 64<<10))
			var r int
			r, err = syscall.Read(q.r, buf)
			k = int64(r)
		}
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("zerocopy: skipping pipe bytes: %w", err)
		}
		if k == 0 {
			return ErrShort
		}
		n -= int(k)
	}
	return nil
}

// rawConn is socket c's raw descriptor access.
func rawConn(c net.Conn) (syscall.RawConn, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("zerocopy: %T is not a socket", c)
	}
	return sc.SyscallConn()
}

// SendTo writes bytes [off, off+n) of the payload to socket dst, by
// reference; the pipe keeps them.
func (p *Pipe) SendTo(dst net.Conn, off, n int) error {
	rc, err := rawConn(dst)
	if err != nil {
		return err
	}
	return p.each(off, n, func(q *pipe, k int) error {
		left, err := drainTo(rc, q.r, k)
		if err == nil && left > 0 {
			err = ErrShort
		}
		return err
	})
}

// WriteToFile writes bytes [off, off+n) of the payload into f at position
// at (the file system copies them from the pipe's pages: one copy).
func (p *Pipe) WriteToFile(f *os.File, at int64, off, n int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	pos := at
	return p.each(off, n, func(q *pipe, left int) error {
		var serr error
		cerr := rc.Control(func(fd uintptr) {
			for left > 0 {
				k, err := syscall.Splice(q.r, nil, int(fd), &pos, left, spliceFlags)
				switch {
				case err == syscall.EINTR:
					continue
				case err != nil:
					serr = err
					return
				case k == 0:
					serr = ErrShort
					return
				}
				left -= int(k)
			}
		})
		if serr == nil && cerr != nil {
			// Control fails only for a file closed meanwhile (its
			// descriptor is gone): nothing more was written
			serr = fmt.Errorf("%w (%v)", os.ErrClosed, cerr)
		}
		return serr
	})
}

// SpliceReply writes head and then the whole payload to fd (a FUSE
// device: the reply to a read) as one splice, without copying the
// payload through the process: head is written into a pipe of its own,
// the payload's segments teed in behind it, and that pipe spliced into
// fd. The payload stays in p (Release drops it). ok false: the payload
// did not fit one pipe behind head, and nothing was written (the caller
// sends the reply from ReadAt). ok true with an error: the splice into fd
// failed.
func (p *Pipe) SpliceReply(fd int, head []byte) (ok bool, err error) {
	q, err := getBigPipe()
	if err != nil {
		return false, nil
	}
	total := len(head) + p.n
	if total > q.size {
		putBigPipe(q)
		return false, nil
	}
	if k, err := syscall.Write(q.w, head); err != nil || k != len(head) {
		q.close()
		return false, nil
	}
	for _, sg := range p.segs {
		if sg.n == 0 {
			continue
		}
		// one tee per segment: a second would duplicate its start again
		if t, err := teeAll(sg.p.r, q.w, sg.n); err != nil || t != sg.n {
			q.close() // the pipe's slots ran out (small pieces): not whole
			return false, nil
		}
	}
	for left := total; left > 0; {
		// a FUSE device takes a reply whole from one splice
		k, err := syscall.Splice(q.r, nil, fd, nil, left, 0)
		if err == syscall.EINTR {
			continue
		}
		if err == nil && int(k) != left {
			err = fmt.Errorf("zerocopy: spliced %d of a %d-byte reply", k, total)
		}
		if err != nil {
			q.close()
			return true, err
		}
		left = 0
	}
	putBigPipe(q)
	return true, nil
}

// ReadAt copies bytes [off, off+len(b)) of the payload into b.
func (p *Pipe) ReadAt(b []byte, off int) error {
	got := 0
	return p.each(off, len(b), func(q *pipe, left int) error {
		for left > 0 {
			k, err := syscall.Read(q.r, b[got:got+left])
			if err == syscall.EINTR {
				continue
			}
			if err != nil || k == 0 {
				if err == nil {
					err = ErrShort
				}
				return fmt.Errorf("zerocopy: reading a pipe: %w", err)
			}
			got += k
			left -= k
		}
		return nil
	})
}

// Release drops the payload and keeps the pipes for other ones.
func (p *Pipe) Release() {
	for _, sg := range p.segs {
		if sg.n > 0 && skip(sg.p, sg.n) != nil {
			sg.p.close()
		} else {
			putBigPipe(sg.p)
		}
	}
	p.segs, p.n = nil, 0
}

// SendPages writes b to socket dst by reference: vmsplice hands b's pages
// to a pipe and splice moves them on into the socket, so the process does
// not copy them. The kernel holds references to those pages, not copies:
// whoever reads the bytes later (the peer, or a socket's queue still
// holding them) reads the pages as they are then. The caller therefore
// keeps b unchanged until the peer has answered for the bytes, and if it
// may not get that answer (a failed call) it must detach b's pages from
// its memory (Detach) before writing into b again.
func SendPages(dst net.Conn, b []byte) error {
	rc, err := rawConn(dst)
	if err != nil {
		return err
	}
	q, err := getBigPipe()
	if err != nil {
		return err
	}
	for len(b) > 0 {
		iov := []unix.Iovec{{Base: &b[0]}}
		iov[0].SetLen(len(b))
		k, err := unix.Vmsplice(q.w, iov, unix.SPLICE_F_NONBLOCK)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || k <= 0 {
			q.close()
			if err == nil {
				err = ErrShort
			}
			return fmt.Errorf("zerocopy: vmsplice: %w", err)
		}
		if _, err := drainTo(rc, q.r, k); err != nil {
			q.close() // it may hold references to b
			return err
		}
		b = b[k:]
	}
	putBigPipe(q)
	return nil
}

// Detach replaces the whole pages of b with fresh zeroed ones in the
// process's memory (madvise MADV_DONTNEED): references the kernel still
// holds from SendPages keep the old pages and their bytes, and writing into
// b no longer changes what they read. b must be page-aligned and own its
// pages whole (bufpool's buffers do); its bytes read as zeroes afterwards.
func Detach(b []byte) error {
	if !Detachable(b) {
		return fmt.Errorf("zerocopy: detaching %d bytes not on whole pages", cap(b))
	}
	if cap(b) == 0 {
		return nil
	}
	return unix.Madvise(b[:cap(b)], unix.MADV_DONTNEED)
}

// page is the size Detach works in.
const page = 4096

// Detachable reports whether b starts on a page and its capacity is whole
// pages, as Detach needs.
func Detachable(b []byte) bool {
	b = b[:cap(b)]
	return len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))%page == 0 && len(b)%page == 0
}

// WholePages returns b with its capacity cut to the whole pages its bytes
// take, so that it is Detachable, if b starts on a page and has the room;
// nil if not (or b is empty).
func WholePages(b []byte) []byte {
	n := (len(b) + page - 1) / page * page
	if len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))%page != 0 || n > cap(b) {
		return nil
	}
	return b[:len(b):n]
}
