package client

import (
	"context"
	"syscall"
)

// Serve mounts fs, follows the change feed and ships Beacon's records
// until ctx ends (then it unmounts) or the kernel unmounts it; announce,
// if set, runs meanwhile once the mount is up (the caller's registration
// of the mount with the metadata service: the client links no daemon
// membership code).
func (fs *FS) Serve(ctx context.Context, announce func(ctx context.Context)) error {
	mnt, log := fs.cfg.Mountpoint, fs.log
	fs.Join(ctx)
	srv, err := fs.Mount()
	if err != nil {
		return err
	}
	log.Info("mounted", "mountpoint", mnt)
	go fs.Follow(ctx, srv)
	go fs.v.RenewLocks(ctx)
	go fs.v.SendAtimes(ctx)
	fs.Ship(ctx)
	if announce != nil {
		go announce(ctx)
	}
	done := make(chan struct{})
	go func() {
		srv.Wait()
		close(done)
	}()
	select {
	case <-ctx.Done():
		if err := srv.Unmount(); err != nil {
			log.Warn("unmount failed, detaching", "err", err)
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
		<-done
	case <-done:
	}
	fs.Close()
	return nil
}
