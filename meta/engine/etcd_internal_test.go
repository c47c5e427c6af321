package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestEtcdRetryable: the etcd errors a transaction is sent again after
// are those where it was not applied or may go through on another
// member: unreachable, no leader, a timeout, a member whose applying lags
// ("too many requests", which a loaded two-core machine gave a flush in
// CI); a refused compare or a request too large is not sent again.
func TestEtcdRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{rpctypes.ErrTooManyRequests, true},
		{rpctypes.ErrGRPCRequestTooManyRequests, true},
		{rpctypes.ErrNoLeader, true},
		{rpctypes.ErrTimeout, true},
		{status.Error(codes.Unavailable, "connection reset"), true},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), true},
		{rpctypes.ErrRequestTooLarge, false},
		{rpctypes.ErrTooManyOps, false},
		{errors.New("something else"), false},
	} {
		if got := retryable(tc.err); got != tc.want {
			t.Errorf("retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
