// Package fwdjobs keeps the forwarding-map manager's registered jobs
// (manager/forwarding: each job's compute nodes and the forwarding nodes
// DFRA gave it) under their own keys in the metadata daemon's engine, so
// that a restarted metadata daemon, or a standby taking over, resumes
// with them. It stores what it is given and decides nothing; it must not
// touch the namespace.
package fwdjobs

import (
	"github.com/sluice-hpc/sluice/meta/engine"
)

// Prefix is the first byte of the jobs' engine keys ('F' job); the
// metadata daemon's key schema (meta/schema.go) reserves it.
const Prefix = 'F'

// Jobs is the registered jobs on an engine.
type Jobs struct{ e engine.Engine }

// Open returns the jobs kept in e.
func Open(e engine.Engine) *Jobs { return &Jobs{e: e} }

func key(job string) []byte { return append([]byte{Prefix}, job...) }

// SaveJob keeps job's record (the manager's encoding), durably.
func (j *Jobs) SaveJob(job string, v []byte) error {
	var b engine.Batch
	b.Set(key(job), v)
	return j.e.Apply(&b, true)
}

// DeleteJob forgets job.
func (j *Jobs) DeleteJob(job string) error {
	var b engine.Batch
	b.Del(key(job))
	return j.e.Apply(&b, true)
}

// Jobs returns every job's record.
func (j *Jobs) Jobs() (map[string][]byte, error) {
	out := map[string][]byte{}
	err := j.e.Scan([]byte{Prefix}, nil, func(k, v []byte) bool {
		out[string(k[1:])] = append([]byte(nil), v...)
		return true
	})
	return out, err
}
