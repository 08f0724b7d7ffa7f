package frames_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Kinds of refusal a JSON Schema cannot express: they concern the bytes of
// the line rather than the JSON value it parses to.
var schemaBlindKinds = map[string]string{
	"line_too_long": "a transport limit, not a property of the value",
	"syntax":        "not JSON, or JSON a generic parser repairs (lone surrogates) or accepts (a newline as whitespace, deep nesting)",
	"trailing_data": "a JSON parser stops at the end of the value or fails",
	"duplicate_key": "a generic parser keeps one of the values",
	"bad_payload":   "the content of a compressed block, which a schema cannot inflate",
}

// Single vectors whose rule the schema cannot state, with the reason.
var schemaBlindVectors = map[string]string{
	"bad_integer.negative_zero":             "-0 equals 0 to JSON Schema",
	"bad_integer.zero_fraction":             "1.0 is an integer to JSON Schema",
	"bad_integer.exponent":                  "1e3 is an integer to JSON Schema",
	"bad_integer.exponent_signed":           "10E+2 is an integer to JSON Schema",
	"bad_timestamp.february_30":             "a pattern cannot know the calendar (round trip)",
	"bad_timestamp.february_29_common_year": "a pattern cannot know the calendar (round trip)",
	"out_of_bounds.environment_bytes":       "a byte total over keys and values",
	"out_of_bounds.data_one_over_max":       "the schema bounds the base64 text, not the decoded length",
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertContent()
	s, err := c.Compile(filepath.Join("schema", "procwire.v1.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSchemaValid(t *testing.T) {
	s := compileSchema(t)
	for i, line := range readLines(t, "valid.ndjson") {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
		if err != nil {
			t.Fatalf("valid line %d: %v", i+1, err)
		}
		if err := s.Validate(v); err != nil {
			t.Errorf("valid line %d (%.80s) fails the schema: %v", i+1, line, err)
		}
	}
	for _, nc := range readNDJSON[noncanonicalVector](t, "noncanonical.ndjson") {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(nc.Line)))
		if err != nil {
			t.Fatalf("%s: %v", nc.ID, err)
		}
		if err := s.Validate(v); err != nil {
			t.Errorf("%s fails the schema: %v", nc.ID, err)
		}
	}
}

func TestSchemaInvalid(t *testing.T) {
	s := compileSchema(t)
	checked := 0
	for _, iv := range readNDJSON[invalidVector](t, "invalid.ndjson") {
		if _, blind := schemaBlindKinds[iv.Error.Kind]; blind {
			continue
		}
		if _, blind := schemaBlindVectors[iv.ID]; blind {
			continue
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(iv.raw()))
		if err != nil {
			continue // not well-formed JSON: nothing for a schema to judge
		}
		checked++
		if err := s.Validate(v); err == nil {
			t.Errorf("%s: the schema accepts a line the decoder refuses (%s)", iv.ID, iv.Error.Kind)
		}
	}
	t.Logf("%d invalid vectors refused by the schema too", checked)
}
