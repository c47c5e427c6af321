package beaconrpc

import (
	"context"
	"encoding/json"
	"time"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// Caller sends one request (an *rpc.Client to the metadata daemon, or to a
// forwarding node, which relays OpBeacon).
type Caller interface {
	Call(ctx context.Context, req *wire.Msg, payload, into []byte) (*wire.Msg, []byte, error)
}

// Client asks the Beacon service.
type Client struct{ C Caller }

func (c Client) call(ctx context.Context, m *wire.Msg, payload []byte, out any) error {
	m.Op = wire.OpBeacon
	_, p, err := c.C.Call(ctx, m, payload, nil)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(p, out)
}

// Put ships one compressed batch (the Shipper's Send).
func (c Client) Put(ctx context.Context, batch []byte) error {
	return c.call(ctx, &wire.Msg{Name: CallPut}, batch, nil)
}

// Query returns the records matching q.
func (c Client) Query(ctx context.Context, q Query) ([]beacon.Record, error) {
	b, _ := json.Marshal(q)
	_, p, err := c.C.Call(ctx, &wire.Msg{Op: wire.OpBeacon, Name: CallQuery}, b, nil)
	if err != nil {
		return nil, err
	}
	return beacon.Decode(p)
}

// Jobs lists known jobs, most recent first.
func (c Client) Jobs(ctx context.Context) ([]beacon.JobInfo, error) {
	var out []beacon.JobInfo
	return out, c.call(ctx, &wire.Msg{Name: CallJobs}, nil, &out)
}

// Health lists servers flagged fail-slow.
func (c Client) Health(ctx context.Context) ([]beacon.SlowServer, error) {
	var out []beacon.SlowServer
	return out, c.call(ctx, &wire.Msg{Name: CallHealth}, nil, &out)
}

// Interference lists job pairs that slowed each other in [from, to)
// (involving job, if set).
func (c Client) Interference(ctx context.Context, job string, from, to time.Time) ([]beacon.Interference, error) {
	q := Query{Job: job}
	if !from.IsZero() {
		q.From = from.UnixNano()
	}
	if !to.IsZero() {
		q.To = to.UnixNano()
	}
	b, _ := json.Marshal(q)
	var out []beacon.Interference
	return out, c.call(ctx, &wire.Msg{Name: CallInterference}, b, &out)
}

// PutProfile merges a profile into the stored one of its key.
func (c Client) PutProfile(ctx context.Context, p beacon.Profile) error {
	b, _ := json.Marshal(p)
	return c.call(ctx, &wire.Msg{Name: CallProfilePut}, b, nil)
}

// Profile returns one application's profile.
func (c Client) Profile(ctx context.Context, key string) (beacon.Profile, error) {
	var out beacon.Profile
	return out, c.call(ctx, &wire.Msg{Name: CallProfileGet, Path: key}, nil, &out)
}

// Profiles lists every profile.
func (c Client) Profiles(ctx context.Context) ([]beacon.Profile, error) {
	var out []beacon.Profile
	return out, c.call(ctx, &wire.Msg{Name: CallProfiles}, nil, &out)
}

// ProfileJob builds a job's profile now and merges it.
func (c Client) ProfileJob(ctx context.Context, job string) (beacon.Profile, error) {
	var out beacon.Profile
	return out, c.call(ctx, &wire.Msg{Name: CallProfileJob, Who: wire.Who{Job: job}}, nil, &out)
}
