package machine

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Change is a scheduled change of some resources' capacity, as a machine
// sees them over a day: a forwarding node or a storage group taken down
// for maintenance (Factor 0), a target rebuilding its RAID at a third of
// its speed, a device turning slow for good (For 0). From At on, for For
// seconds (0: to the end of the run), the capacity of every forwarding
// node (bandwidth and operation rate) and storage target it names is
// multiplied by Factor; changes that overlap multiply. Names are ids as
// the simulator gives them, one by one or as a range "fwd0010..fwd0033";
// Groups names every target of those storage groups.
type Change struct {
	At      float64  `json:"at"`            // seconds from the start of the run
	For     float64  `json:"for,omitempty"` // seconds; 0: for good
	Fwds    []string `json:"fwds,omitempty"`
	Targets []string `json:"targets,omitempty"`
	Groups  []int    `json:"groups,omitempty"`
	Factor  float64  `json:"factor"`
	Note    string   `json:"note,omitempty"`
}

// Down reports whether the change takes what it names out of service.
func (c Change) Down() bool { return c.Factor == 0 }

// String is the change as ParseChange reads it.
func (c Change) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "at=%s", secs(c.At))
	if c.For > 0 {
		fmt.Fprintf(&b, " for=%s", secs(c.For))
	}
	if len(c.Fwds) > 0 {
		fmt.Fprintf(&b, " fwds=%s", strings.Join(c.Fwds, ","))
	}
	if len(c.Targets) > 0 {
		fmt.Fprintf(&b, " targets=%s", strings.Join(c.Targets, ","))
	}
	if len(c.Groups) > 0 {
		g := make([]string, len(c.Groups))
		for i, x := range c.Groups {
			g[i] = strconv.Itoa(x)
		}
		fmt.Fprintf(&b, " groups=%s", strings.Join(g, ","))
	}
	fmt.Fprintf(&b, " factor=%g", c.Factor)
	return b.String()
}

func secs(s float64) string {
	return time.Duration(s * float64(time.Second)).String()
}

// ParseChange reads a change as `sluice sim day --change` takes it:
// space-separated key=value, "at=2h for=30m fwds=fwd0000..fwd0023
// factor=0" (at and for as durations or seconds; fwds and targets
// comma-separated ids or ranges; groups comma-separated numbers).
func ParseChange(s string) (Change, error) {
	var c Change
	factor := false
	for _, f := range strings.Fields(s) {
		k, v, ok := strings.Cut(f, "=")
		if !ok || v == "" {
			return c, fmt.Errorf("change %q: %q is not key=value", s, f)
		}
		var err error
		switch k {
		case "at":
			c.At, err = seconds(v)
		case "for":
			c.For, err = seconds(v)
		case "fwds":
			c.Fwds = strings.Split(v, ",")
		case "targets":
			c.Targets = strings.Split(v, ",")
		case "groups":
			for _, g := range strings.Split(v, ",") {
				n, e := strconv.Atoi(g)
				if e != nil {
					err = fmt.Errorf("group %q is not a number", g)
					break
				}
				c.Groups = append(c.Groups, n)
			}
		case "factor":
			c.Factor, err = strconv.ParseFloat(v, 64)
			factor = true
		default:
			err = fmt.Errorf("unknown key (want at, for, fwds, targets, groups, factor)")
		}
		if err != nil {
			return c, fmt.Errorf("change %q: %s: %v", s, k, err)
		}
	}
	if !factor {
		return c, fmt.Errorf("change %q: no factor (0: down)", s)
	}
	return c, c.check()
}

func seconds(v string) (float64, error) {
	if d, err := time.ParseDuration(v); err == nil {
		return d.Seconds(), nil
	}
	return strconv.ParseFloat(v, 64)
}

// check validates a change on its own (the names against a machine:
// Expand).
func (c Change) check() error {
	var bad []string
	if !(c.At >= 0) || !(c.For >= 0) {
		bad = append(bad, "at and for must be ≥ 0")
	}
	if !(c.Factor >= 0) {
		bad = append(bad, "factor must be ≥ 0")
	}
	if len(c.Fwds)+len(c.Targets)+len(c.Groups) == 0 {
		bad = append(bad, "names no forwarding node, target or group")
	}
	for _, n := range c.Fwds {
		if _, _, err := idRange(n, "fwd"); err != nil {
			bad = append(bad, err.Error())
		}
	}
	for _, n := range c.Targets {
		if _, _, err := idRange(n, "ost"); err != nil {
			bad = append(bad, err.Error())
		}
	}
	for _, g := range c.Groups {
		if g < 0 {
			bad = append(bad, "groups must be ≥ 0")
			break
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("change at %s: %s", secs(c.At), strings.Join(bad, "; "))
	}
	return nil
}

// idRange reads "fwd0003" or "fwd0010..fwd0033" (prefix fwd or ost) as
// the numbers from..to.
func idRange(s, prefix string) (int, int, error) {
	num := func(x string) (int, error) {
		d, ok := strings.CutPrefix(x, prefix)
		n, err := strconv.Atoi(d)
		if !ok || err != nil || n < 0 {
			return 0, fmt.Errorf("%q is not a %s id (%s0003) nor a range of them (%s0000..%s0009)", s, prefix, prefix, prefix, prefix)
		}
		return n, nil
	}
	a, b, isRange := strings.Cut(s, "..")
	from, err := num(a)
	if err != nil {
		return 0, 0, err
	}
	to := from
	if isRange {
		if to, err = num(b); err != nil {
			return 0, 0, err
		}
		if to < from {
			return 0, 0, fmt.Errorf("range %q runs backwards", s)
		}
	}
	return from, to, nil
}

// Expand is what the change names on a machine of fwds forwarding nodes
// and groups × perGroup targets: forwarding node and target numbers, each
// once, in order; an error for a name beyond the machine.
func (c Change) Expand(fwds, groups, perGroup int) (fwdNums, targetNums []int, err error) {
	if err := c.check(); err != nil {
		return nil, nil, err
	}
	seen := map[int]bool{}
	for _, n := range c.Fwds {
		from, to, _ := idRange(n, "fwd")
		if to >= fwds {
			return nil, nil, fmt.Errorf("change at %s: %s: the machine has forwarding nodes fwd0000..fwd%04d", secs(c.At), n, fwds-1)
		}
		for i := from; i <= to; i++ {
			if !seen[i] {
				seen[i] = true
				fwdNums = append(fwdNums, i)
			}
		}
	}
	seen = map[int]bool{}
	add := func(i int) {
		if !seen[i] {
			seen[i] = true
			targetNums = append(targetNums, i)
		}
	}
	for _, n := range c.Targets {
		from, to, _ := idRange(n, "ost")
		if to >= groups*perGroup {
			return nil, nil, fmt.Errorf("change at %s: %s: the machine has targets ost00000..ost%05d", secs(c.At), n, groups*perGroup-1)
		}
		for i := from; i <= to; i++ {
			add(i)
		}
	}
	for _, g := range c.Groups {
		if g >= groups {
			return nil, nil, fmt.Errorf("change at %s: group %d: the machine has groups 0..%d", secs(c.At), g, groups-1)
		}
		for i := g * perGroup; i < (g+1)*perGroup; i++ {
			add(i)
		}
	}
	slices.Sort(fwdNums)
	slices.Sort(targetNums)
	return fwdNums, targetNums, nil
}
