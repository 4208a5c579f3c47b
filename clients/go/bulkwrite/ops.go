package bulkwrite

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	bw "github.com/bulkwrite/bulkwrite/clients/go/bulkwritev1"
)

// Ops is a stream of ops, read once, in order; a non-nil error ends it.
type Ops = iter.Seq2[*bw.Op, error]

// Slice streams ops held in memory.
func Slice(ops []*bw.Op) Ops {
	return func(yield func(*bw.Op, error) bool) {
		for _, op := range ops {
			if !yield(op, nil) {
				return
			}
		}
	}
}

// Create is a CREATE of objectType: id 0 lets the table assign one; shardKey routes it
// (the object type's create_route: an owner's id, or a name hashed with md5).
func Create(objectType string, id uint64, shardKey string, fields ...*bw.Field) *bw.Op {
	return &bw.Op{Op: bw.OpType_CREATE, ObjectType: objectType, Id: id, ShardKey: shardKey, Fields: fields}
}

// Update changes columns of an existing object (a missing object is a no-op).
func Update(objectType string, id uint64, fields ...*bw.Field) *bw.Op {
	return &bw.Op{Op: bw.OpType_UPDATE, ObjectType: objectType, Id: id, Fields: fields}
}

// Upsert inserts the object or updates it.
func Upsert(objectType string, id uint64, fields ...*bw.Field) *bw.Op {
	return &bw.Op{Op: bw.OpType_UPSERT, ObjectType: objectType, Id: id, Fields: fields}
}

// Delete deletes an object.
func Delete(objectType string, id uint64) *bw.Op {
	return &bw.Op{Op: bw.OpType_DELETE, ObjectType: objectType, Id: id}
}

// Set assigns a column: v is nil (NULL), a bool, an integer, a float, a string (text) or
// []byte (binary). Any other type panics: it is a programming error, not data.
func Set(name string, v any) *bw.Field { return &bw.Field{Name: name, Value: Value(v)} }

// Incr adds n to a numeric column (UPDATE only).
func Incr(name string, n int64) *bw.Field {
	return &bw.Field{Name: name, Value: Value(n), Increment: true}
}

// Value is the typed Value of a Go value (see Set).
func Value(v any) *bw.Value {
	switch x := v.(type) {
	case nil:
		return &bw.Value{Kind: &bw.Value_NullValue{NullValue: true}}
	case bool:
		return &bw.Value{Kind: &bw.Value_BoolValue{BoolValue: x}}
	case int:
		return intValue(int64(x))
	case int8:
		return intValue(int64(x))
	case int16:
		return intValue(int64(x))
	case int32:
		return intValue(int64(x))
	case int64:
		return intValue(x)
	case uint8:
		return intValue(int64(x))
	case uint16:
		return intValue(int64(x))
	case uint32:
		return intValue(int64(x))
	case float32:
		return &bw.Value{Kind: &bw.Value_DoubleValue{DoubleValue: float64(x)}}
	case float64:
		return &bw.Value{Kind: &bw.Value_DoubleValue{DoubleValue: x}}
	case string:
		return &bw.Value{Kind: &bw.Value_StringValue{StringValue: []byte(x)}}
	case []byte:
		return &bw.Value{Kind: &bw.Value_BytesValue{BytesValue: x}}
	}
	panic(fmt.Sprintf("bulkwrite.Value: no column value of type %T", v))
}

func intValue(n int64) *bw.Value { return &bw.Value{Kind: &bw.Value_IntValue{IntValue: n}} }

// JSONLines streams the ops of r, one per line in the API's JSON encoding (docs/api.md,
// "JSON encoding"; the files `bwctl submit` reads): {"op": "create", "object_type": "pin",
// "id": 1, "shard_key": "42", "fields": {"title": "x", "like_count": {"increment": 1},
// "image": {"base64": "…"}}}. Blank lines are skipped; a line that does not parse ends the
// stream with an error naming its number.
func JSONLines(r io.Reader) Ops {
	return func(yield func(*bw.Op, error) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for n := 1; sc.Scan(); n++ {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			op, err := parseOpJSON(line)
			if err != nil {
				yield(nil, fmt.Errorf("line %d: %w", n, err))
				return
			}
			if !yield(op, nil) {
				return
			}
		}
		if err := sc.Err(); err != nil {
			yield(nil, err)
		}
	}
}

type opJSON struct {
	Op         string                     `json:"op"`
	ObjectType string                     `json:"object_type"`
	ID         json.Number                `json:"id"`
	ShardKey   string                     `json:"shard_key"`
	Fields     map[string]json.RawMessage `json:"fields"`
}

func parseOpJSON(line []byte) (*bw.Op, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var j opJSON
	if err := dec.Decode(&j); err != nil {
		return nil, err
	}
	kind, ok := bw.OpType_value[strings.ToUpper(j.Op)]
	if !ok || kind == 0 {
		return nil, fmt.Errorf("op %q is not create, update, upsert or delete", j.Op)
	}
	op := &bw.Op{Op: bw.OpType(kind), ObjectType: j.ObjectType, ShardKey: j.ShardKey}
	if j.ID != "" {
		id, err := strconv.ParseUint(string(j.ID), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("id %s is not an unsigned 64-bit integer", j.ID)
		}
		op.Id = id
	}
	// in the order of the names: a map has none, and the same line must give the same part
	for _, name := range slices.Sorted(maps.Keys(j.Fields)) {
		f, err := parseFieldJSON(name, j.Fields[name])
		if err != nil {
			return nil, err
		}
		op.Fields = append(op.Fields, f)
	}
	return op, nil
}

func parseFieldJSON(name string, raw json.RawMessage) (*bw.Field, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("field %q: %w", name, err)
	}
	f := &bw.Field{Name: name}
	if obj, ok := v.(map[string]any); ok && len(obj) == 1 {
		if inc, ok := obj["increment"]; ok {
			f.Increment = true
			v = inc
		} else if b64, ok := obj["base64"].(string); ok {
			data, err := decodeBase64(b64)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", name, err)
			}
			f.Value = Value(data)
			return f, nil
		}
	}
	val, err := jsonValue(v)
	if err != nil {
		return nil, fmt.Errorf("field %q: %w", name, err)
	}
	f.Value = val
	return f, nil
}

func jsonValue(v any) (*bw.Value, error) {
	switch x := v.(type) {
	case nil, bool, string:
		return Value(x), nil
	case json.Number:
		if !strings.ContainsAny(string(x), ".eE") {
			n, err := strconv.ParseInt(string(x), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s is out of the signed 64-bit range", x)
			}
			return Value(n), nil
		}
		d, err := strconv.ParseFloat(string(x), 64)
		if err != nil || math.IsInf(d, 0) {
			return nil, fmt.Errorf("%s is out of the double range", x)
		}
		return Value(d), nil
	}
	return nil, fmt.Errorf("a value is null, a boolean, a number, a string, {\"base64\": …} or {\"increment\": n}")
}

func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "-_") {
		return base64.RawURLEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}
