package cluster

import (
	"fmt"
	mrand "math/rand"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// portPicker hands out distinct loopback ports for a cluster's daemons. A
// port taken from the kernel's ephemeral range can be handed to some other
// process's outgoing connection between our check and the daemon's bind (CI
// saw exactly that), so ports come from below that range; every port picked
// stays bound until release, so one cluster never gets the same port twice.
type portPicker struct {
	held []net.Listener
	rng  *mrand.Rand
}

func newPortPicker() *portPicker {
	return &portPicker{rng: mrand.New(mrand.NewSource(time.Now().UnixNano() ^ int64(os.Getpid())))}
}

// ephemeralLow is the lowest port the kernel uses for outgoing connections.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}

func (p *portPicker) pick() (string, error) {
	const lo = 10000
	if hi := ephemeralLow(); hi-lo >= 1000 {
		for i := 0; i < 200; i++ {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", lo+p.rng.Intn(hi-lo)))
			if err == nil {
				p.held = append(p.held, ln)
				return ln.Addr().String(), nil
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	p.held = append(p.held, ln)
	return ln.Addr().String(), nil
}

// release unbinds the picked ports so the daemons can take them.
func (p *portPicker) release() {
	for _, ln := range p.held {
		ln.Close()
	}
	p.held = nil
}
