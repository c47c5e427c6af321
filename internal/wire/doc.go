// Package wire owns sluice's on-the-wire format: the frame header, the
// protocol's version, the codec every message type implements (Message,
// Codec: numbered fields, unknown ones skipped, so a minor version can add
// fields), the registry of operations (Spec: number, name, service,
// request and reply types; Def ties an operation to its types), the types
// shared by several services (attributes, chunk locations, servers, the
// identity of a request's application) and the protocol's constants. It
// knows nothing about sockets, authentication or what operations do;
// package rpc moves frames, the daemons give them meaning.
//
// A frame is a fixed 24-byte header (with the operation's number) followed
// by an encoded message body and an optional raw payload (file data). The
// payload is never copied by the codec: it is read straight into a
// caller-provided buffer.
package wire
