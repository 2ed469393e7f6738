package jsonl

import "fmt"

// Names are an enum's names in JSON (its MarshalText and UnmarshalText
// written once): kind names the field in errors, "verdict kind".
type Names[E comparable] struct {
	Kind string
	Of   map[E]string
}

// Marshal returns v's name; an error for a value with none.
func (n Names[E]) Marshal(v E) ([]byte, error) {
	if s, ok := n.Of[v]; ok {
		return []byte(s), nil
	}
	return nil, fmt.Errorf("%s %v has no name", n.Kind, v)
}

// Unmarshal sets *v to the value named b; an error for an unknown name.
func (n Names[E]) Unmarshal(b []byte, v *E) error {
	for k, s := range n.Of {
		if s == string(b) {
			*v = k
			return nil
		}
	}
	return fmt.Errorf("unknown %s %q", n.Kind, b)
}
