// Package wire owns sluice's on-the-wire format: the frame header, the single
// tagged message type (Msg) every request and response uses, and its binary
// codec. It knows nothing about sockets, authentication or the meaning of
// operations beyond their numbers; package rpc moves frames, the daemons give
// them meaning.
//
// A frame is a fixed 24-byte header followed by an encoded Msg body and an
// optional raw payload (file data). The payload is never copied by the codec:
// it is read straight into a caller-provided buffer.
package wire
