// Package swf reads job logs in the Standard Workload Format of the
// Parallel Workloads Archive (Feitelson et al.): one job per line, 18
// whitespace-separated fields, ';' header comments, -1 for unknown.
//
// It owns the parsing only: scaling a log to a machine and giving jobs
// I/O behaviour is package sim's.
package swf

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Job is one line of a log. Times are seconds; -1 is unknown.
type Job struct {
	ID        int64
	Submit    float64 // since the log's start
	Wait      float64
	Run       float64
	Procs     int // allocated processors (requested if unknown)
	ReqProcs  int
	ReqTime   float64
	User      int
	Group     int
	App       int
	Queue     int
	Status    int
	Partition int
}

// Start is when the job started: Submit + Wait (Submit if the wait is
// unknown).
func (j Job) Start() float64 {
	if j.Wait > 0 {
		return j.Submit + j.Wait
	}
	return j.Submit
}

// Parse reads a log (gzip-compressed or plain). Lines with fewer than 18
// fields or fields that are not numbers are errors naming the line; jobs
// without a run time or a processor count are skipped (the archive marks
// cancelled jobs so).
func Parse(r io.Reader) ([]Job, error) {
	br := bufio.NewReader(r)
	if head, err := br.Peek(2); err == nil && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		br = bufio.NewReader(zr)
	}
	var jobs []Job
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 || text[0] == ';' {
			continue
		}
		f := strings.Fields(string(text))
		if len(f) < 18 {
			return nil, fmt.Errorf("swf line %d: %d fields, want 18", line, len(f))
		}
		var v [18]float64
		for i := 0; i < 18; i++ {
			x, err := strconv.ParseFloat(f[i], 64)
			if err != nil || x != x {
				return nil, fmt.Errorf("swf line %d field %d: %q is not a number", line, i+1, f[i])
			}
			v[i] = x
		}
		j := Job{ID: int64(v[0]), Submit: v[1], Wait: v[2], Run: v[3], Procs: clampInt(v[4]), ReqProcs: clampInt(v[7]),
			ReqTime: v[8], User: clampInt(v[11]), Group: clampInt(v[12]), App: clampInt(v[13]), Queue: clampInt(v[14]),
			Status: clampInt(v[10]), Partition: clampInt(v[15])}
		if j.Procs <= 0 {
			j.Procs = j.ReqProcs
		}
		if j.Run <= 0 || j.Procs <= 0 || j.Submit < 0 {
			continue
		}
		jobs = append(jobs, j)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("swf line %d: %w", line+1, err)
	}
	return jobs, nil
}

// ParseFile reads a log from a file.
func ParseFile(path string) ([]Job, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f)
}

func clampInt(x float64) int {
	switch {
	case x > 1<<40:
		return 1 << 40
	case x < -1:
		return -1
	}
	return int(x)
}
