// Package wiretest checks message types against the wire codec's rules,
// for the tests of every package that defines them: each exported field is
// visited (a value in every field survives a round trip), field numbers go
// up, nothing is lost or changed in a message encoded by an earlier minor
// version (golden files), and the decoder takes any input without
// panicking. It must not be imported outside tests.
package wiretest

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sluice-hpc/sluice/internal/wire"
)

// Fill sets every exported field of the value v points to that the wire
// carries (not tagged `wire:"-"`) to a distinct non-zero value, lists to
// two elements, optional messages to filled ones.
func Fill(v any) {
	n := 0
	fill(reflect.ValueOf(v).Elem(), &n)
}

func fill(v reflect.Value, n *int) {
	*n++
	k := *n
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Uint, reflect.Uint64, reflect.Uint32, reflect.Uint16, reflect.Uint8:
		v.SetUint(uint64(k) % (1 << (v.Type().Bits() - 1)))
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Int16, reflect.Int8:
		v.SetInt(-int64(k))
	case reflect.Float64, reflect.Float32:
		v.SetFloat(float64(k) + 0.5)
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", k))
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := 0; i < 2; i++ {
			fill(s.Index(i), n)
		}
		v.Set(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), n)
		v.Set(p)
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("wire") == "-" {
				continue
			}
			fill(v.Field(i), n)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for i := 0; i < 2; i++ {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(k, n)
			fill(e, n)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	}
}

// RoundTrip checks that m, filled by Fill, comes back whole from its
// encoding: a field its Fields method forgets, or visits into the wrong
// place, fails.
func RoundTrip(t testing.TB, m wire.Message) {
	t.Helper()
	Fill(m)
	b := wire.Encode(nil, m)
	got := reflect.New(reflect.TypeOf(m).Elem()).Interface().(wire.Message)
	if err := wire.Decode(b, got); err != nil {
		t.Fatalf("%T: decoding its own encoding: %v", m, err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("%T: round trip changed it:\n got %+v\nwant %+v", m, got, m)
	}
}

var update = flag.Bool("update-golden", false, "write golden encodings missing for this protocol version")

// Golden checks m (filled by Fill) against the encodings of the same type
// written by every earlier minor version of this major version, in dir
// (testdata/v<major>.<minor>/name.bin): each must decode, and re-encode to
// exactly its bytes (a field that changed its number or kind, or a value
// read into another field, fails). With -update-golden the current
// version's file is written if it is missing; a version's files are never
// rewritten. (A new major version may change anything: its files start
// afresh.)
func Golden(t testing.TB, dir, name string, m wire.Message) {
	t.Helper()
	Fill(m)
	cur := filepath.Join(dir, "v"+wire.Ours.String(), name+".bin")
	if *update {
		if _, err := os.Stat(cur); os.IsNotExist(err) {
			if err := os.MkdirAll(filepath.Dir(cur), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(cur, wire.Encode(nil, m), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("v%d.*", wire.Major), name+".bin"))
	if len(files) == 0 {
		t.Fatalf("%s: no golden encoding in %s (go test -update-golden writes this version's)", name, dir)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got := reflect.New(reflect.TypeOf(m).Elem()).Interface().(wire.Message)
		if err := wire.Decode(b, got); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if again := wire.Encode(nil, got); !bytes.Equal(again, b) {
			t.Errorf("%s: decoded and encoded again, it differs:\n got %x\nwant %x", f, again, b)
		}
	}
}

// Redecode is the body of a fuzz target: b decoded into a fresh value of
// m's type either fails, or re-encodes to bytes that decode again and
// re-encode to the same bytes (the encoding of what was accepted is a
// fixed point; bytes, not values, are compared: a NaN is not equal to
// itself).
func Redecode(t *testing.T, m wire.Message, b []byte) {
	typ := reflect.TypeOf(m).Elem()
	first := reflect.New(typ).Interface().(wire.Message)
	if wire.Decode(b, first) != nil {
		return
	}
	e1 := wire.Encode(nil, first)
	again := reflect.New(typ).Interface().(wire.Message)
	if err := wire.Decode(e1, again); err != nil {
		t.Fatalf("%T: re-encoded message does not decode: %v", m, err)
	}
	if e2 := wire.Encode(nil, again); !bytes.Equal(e1, e2) {
		t.Fatalf("%T: re-encoding changed it:\n%+v\n%+v", m, first, again)
	}
}

// Operations checks every registered operation of service svc: a name,
// every field of its request and reply visited (RoundTrip), and the
// golden encodings of earlier minor versions in dir read whole (Golden).
func Operations(t *testing.T, dir string, svc wire.Service) {
	t.Helper()
	n := 0
	for _, s := range specsOf(svc) {
		n++
		if s.Name == "" || s.Service == 0 || s.Op.String() != s.Name {
			t.Errorf("operation %d: name %q (String %q), service %v", s.Op, s.Name, s.Op.String(), s.Service)
		}
		RoundTrip(t, s.NewRequest())
		RoundTrip(t, s.NewReply())
		Golden(t, dir, s.Name+".req", s.NewRequest())
		Golden(t, dir, s.Name+".rep", s.NewReply())
	}
	if n == 0 {
		t.Fatalf("no operation of service %v registered", svc)
	}
}

func specsOf(svc wire.Service) []*wire.Spec {
	var out []*wire.Spec
	for _, s := range wire.Specs() {
		if s.Service == svc {
			out = append(out, s)
		}
	}
	return out
}

// Fuzz is a fuzz target over the decoders of service svc's requests and
// replies and of Status: none panics, and whatever one accepts re-encodes
// to a message that decodes to the same value. The input's first byte picks the operation, the
// second request or reply.
func Fuzz(f *testing.F, svc wire.Service) {
	specs := specsOf(svc)
	for i, s := range specs {
		for k, m := range []wire.Message{s.NewRequest(), s.NewReply()} {
			Fill(m)
			f.Add(append([]byte{byte(i), byte(k)}, wire.Encode(nil, m)...))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 2 || len(specs) == 0 {
			return
		}
		s := specs[int(b[0])%len(specs)]
		m := s.NewRequest()
		if b[1]&1 == 1 {
			m = s.NewReply()
		}
		Redecode(t, m, b[2:])
		Redecode(t, &wire.Status{}, b[2:])
	})
}
