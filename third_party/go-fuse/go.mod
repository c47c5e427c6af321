module github.com/hanwen/go-fuse/v2

require golang.org/x/sys v0.28.0

go 1.21
