package durable

import "encoding/json"

// Codec encodes workflow inputs and step outputs for storage. The engine
// checks that every value it encodes decodes back into its type, so a value
// that does not round-trip fails its step (or its trigger) with ErrEncode
// instead of corrupting the run.
type Codec interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// JSONCodec is the default Codec, encoding/json.
type JSONCodec struct{}

// Marshal implements Codec.
func (JSONCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal implements Codec.
func (JSONCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
