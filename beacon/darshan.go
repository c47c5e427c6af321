package beacon

import (
	"strconv"
	"time"
)

// Summary is what an imported log (Darshan) says of one run: the
// executable, its ranks, and per (rank, file) byte and operation counts.
// Rank -1 marks a file record Darshan reduced across all ranks (shared).
type Summary struct {
	Exe     string
	Uid     uint32
	Nprocs  int
	RunTime float64 // seconds
	MetaOps uint64
	Files   []SummaryFile
	Sizes   map[string]uint64 // request size upper bound (bytes, decimal) → operations
}

// SummaryFile is one (rank, file) record.
type SummaryFile struct {
	Rank                  int32
	Id                    string
	ReadBytes, WriteBytes uint64
	Reads, Writes         uint64
	IOTime                float64 // seconds
}

// ReportOfSummary turns an imported run into the report Beacon would have
// built had it monitored the run, so profiles from both sources are alike.
// Darshan does not record nodes: each I/O rank counts as a node.
func ReportOfSummary(s Summary, th Thresholds) JobReport {
	th = th.withDefaults()
	rep := JobReport{Job: "darshan", App: s.Exe, Uid: s.Uid, Ranks: s.Nprocs, Nodes: s.Nprocs}
	ranksOf := map[string]map[int32]bool{}
	bytesOf := map[string]uint64{}
	ioRanks := map[int32]bool{}
	var dataOps uint64
	var ioTime float64
	for _, f := range s.Files {
		b := f.ReadBytes + f.WriteBytes
		rep.ReadBytes += f.ReadBytes
		rep.WriteBytes += f.WriteBytes
		rep.ReadOps += f.Reads
		rep.WriteOps += f.Writes
		dataOps += f.Reads + f.Writes
		ioTime += f.IOTime
		if b == 0 {
			continue
		}
		if ranksOf[f.Id] == nil {
			ranksOf[f.Id] = map[int32]bool{}
		}
		bytesOf[f.Id] += b
		if f.Rank < 0 {
			for r := 0; r < s.Nprocs; r++ {
				ranksOf[f.Id][int32(r)] = true
				ioRanks[int32(r)] = true
			}
		} else {
			ranksOf[f.Id][f.Rank] = true
			ioRanks[f.Rank] = true
		}
	}
	rep.MetaOps = s.MetaOps
	rep.IORanks, rep.IONodes, rep.Files = len(ioRanks), len(ioRanks), len(ranksOf)
	total := rep.ReadBytes + rep.WriteBytes
	if dataOps > 0 {
		rep.MeanRequest = total / dataOps
	}
	// time the ranks spent in I/O, on average; else the run time
	secs := s.RunTime
	if len(ioRanks) > 0 && ioTime > 0 {
		secs = ioTime / float64(len(ioRanks))
	}
	if secs > 0 {
		rep.Active = time.Duration(secs * float64(time.Second))
		rep.BW = float64(total) / secs
		rep.PeakBW = rep.BW
		rep.IOPS = float64(dataOps) / secs
		rep.MetaRate = float64(s.MetaOps) / secs
	}
	for k, n := range s.Sizes {
		if b, err := strconv.ParseUint(k, 10, 64); err == nil {
			rep.Sizes = append(rep.Sizes, SizeBin{Size: b, Ops: n})
		}
	}
	sortBins(rep.Sizes)
	shares := make([]FileShare, 0, len(ranksOf))
	for id, rs := range ranksOf {
		shares = append(shares, FileShare{Bytes: bytesOf[id], Ranks: len(rs)})
	}
	rep.Mode = ioMode(len(ioRanks), shares, total)
	rep.Classes = classify(&rep, dataOps, th)
	return rep
}
