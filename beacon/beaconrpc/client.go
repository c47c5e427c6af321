package beaconrpc

import (
	"context"
	"time"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// Caller sends one request (an *rpc.Client to the metadata daemon, or to a
// forwarding node, which relays the monitoring service's operations).
type Caller = rpc.Invoker

// Client asks the Beacon service.
type Client struct{ C Caller }

// Put ships one compressed batch (the Shipper's Send).
func (c Client) Put(ctx context.Context, batch []byte) error {
	_, _, err := rpc.DoPayload(ctx, c.C, Put, &wire.Empty{}, batch, nil)
	return err
}

// Query returns the records matching q.
func (c Client) Query(ctx context.Context, q Query) ([]beacon.Record, error) {
	_, p, err := rpc.DoPayload(ctx, c.C, QueryOp, &q, nil, nil)
	if err != nil {
		return nil, err
	}
	return beacon.Decode(p)
}

// Jobs lists known jobs, most recent first.
func (c Client) Jobs(ctx context.Context) ([]beacon.JobInfo, error) {
	r, err := rpc.Do(ctx, c.C, JobsOp, &wire.Empty{})
	if err != nil {
		return nil, err
	}
	return r.Jobs, nil
}

// Health lists servers flagged fail-slow.
func (c Client) Health(ctx context.Context) ([]beacon.SlowServer, error) {
	r, err := rpc.Do(ctx, c.C, HealthOp, &wire.Empty{})
	if err != nil {
		return nil, err
	}
	return r.Slow, nil
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
	r, err := rpc.Do(ctx, c.C, Interference, &q)
	if err != nil {
		return nil, err
	}
	return r.Pairs, nil
}

// PutProfile merges a profile into the stored one of its key.
func (c Client) PutProfile(ctx context.Context, p beacon.Profile) error {
	_, err := rpc.Do(ctx, c.C, ProfilePut, &p)
	return err
}

// Profile returns one application's profile.
func (c Client) Profile(ctx context.Context, key string) (beacon.Profile, error) {
	r, err := rpc.Do(ctx, c.C, ProfileGet, &ProfileKey{Key: key})
	if err != nil {
		return beacon.Profile{}, err
	}
	return *r, nil
}

// Profiles lists every profile.
func (c Client) Profiles(ctx context.Context) ([]beacon.Profile, error) {
	r, err := rpc.Do(ctx, c.C, ProfilesOp, &wire.Empty{})
	if err != nil {
		return nil, err
	}
	return r.Profiles, nil
}

// ProfileJob builds a job's profile now and merges it.
func (c Client) ProfileJob(ctx context.Context, job string) (beacon.Profile, error) {
	r, err := rpc.Do(ctx, c.C, ProfileJob, &JobReq{Job: job})
	if err != nil {
		return beacon.Profile{}, err
	}
	return *r, nil
}
