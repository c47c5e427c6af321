# Cross-process TCP ping-pong over loopback: the floor of one hop between
# two processes on this machine. Run it as is (processes may land on
# different vCPUs) and under `taskset -c 0` (one vCPU) to see the cost of
# waking an idle vCPU (docs/benchmarks.md).
#
#   python3 bench/pingpong.py; taskset -c 0 python3 bench/pingpong.py
import socket, os, time, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0)); s.listen(1); port = s.getsockname()[1]
if os.fork() == 0:
    c = socket.create_connection(("127.0.0.1", port)); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        d = c.recv(64)
        if not d: os._exit(0)
        c.sendall(d)
a, _ = s.accept(); a.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
n = 20000
t = time.perf_counter()
for i in range(n):
    a.sendall(b"x"*40); a.recv(64)
print("cross-process python ping-pong us:", (time.perf_counter()-t)/n*1e6)
