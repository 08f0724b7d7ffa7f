package frames_test

import (
	"strings"

	"github.com/procwire/procwire/frames"
)

// The vectors of the application-level ping (PROTOCOL.md §3, "ping"): the
// optional pings of open, resume, opened and resumed, and the ping and pong
// frames.

const (
	pingOpen    = `{"type":"open","instance_id":"inst-1","request":{"executable":"cat","arguments":[],"working_directory":"/tmp","environment":{}},"open_key":"` + openKey + `"`
	pingResume  = `{"type":"resume","process_id":"8f3a0c1e5b7d49a2b6c4e0f1a2b3c4d5","token":"` + tok + `","stdout_received":0`
	pingResumed = `,"stdin_received":0,"stdin_limit":65536`
)

func pingResumedWith(tail string) string {
	return `{"type":"resumed","process_id":"8f3a0c1e5b7d49a2b6c4e0f1a2b3c4d5","evidence":` + evidenceJSON + pingResumed + tail + `}`
}

func pingOpenedWith(tail string) string {
	return strings.TrimSuffix(openedWith(evidenceJSON), "}") + tail + "}"
}

func pingLines() []string {
	return []string{
		pingOpen + `,"pings":true}`,
		pingResume + `,"pings":true}`,
		pingOpenedWith(`,"output_enc":"s2","pings":true`),
		pingResumedWith(`,"pings":true`),
		`{"type":"ping","id":0}`,
		`{"type":"ping","id":1}`,
		`{"type":"ping","id":9007199254740991}`,
		`{"type":"pong","id":0}`,
		`{"type":"pong","id":9007199254740991}`,
	}
}

func pingInvalid() []invalidVector {
	return []invalidVector{
		inv("pings.missing_field_ping_id", `{"type":"ping"}`, "ping", "id", frames.KindMissingField),
		inv("pings.missing_field_pong_id", `{"type":"pong"}`, "pong", "id", frames.KindMissingField),
		inv("pings.ping_id_over_2_53", `{"type":"ping","id":9007199254740992}`, "ping", "id", frames.KindOutOfBounds),
		inv("pings.pong_id_over_2_53", `{"type":"pong","id":18014398509481984}`, "pong", "id", frames.KindOutOfBounds),
		inv("pings.ping_id_negative", `{"type":"ping","id":-1}`, "ping", "id", frames.KindBadInteger),
		inv("pings.ping_id_fraction", `{"type":"ping","id":1.5}`, "ping", "id", frames.KindBadInteger),
		inv("pings.ping_id_string", `{"type":"ping","id":"1"}`, "ping", "id", frames.KindWrongType),
		inv("pings.pong_id_null", `{"type":"pong","id":null}`, "pong", "id", frames.KindWrongType),
		inv("pings.ping_unknown_field", `{"type":"ping","id":1,"at":2}`, "ping", "at", frames.KindUnknownField),
		inv("pings.ping_case_variant", `{"type":"ping","ID":1}`, "ping", "ID", frames.KindCaseVariantKey),
		inv("pings.ping_duplicate_id", `{"type":"ping","id":1,"id":2}`, "ping", "id", frames.KindDuplicateKey),
		inv("pings.open_string", pingOpen+`,"pings":"true"}`, "open", "pings", frames.KindWrongType),
		inv("pings.resume_number", pingResume+`,"pings":1}`, "resume", "pings", frames.KindWrongType),
		inv("pings.opened_null", pingOpenedWith(`,"pings":null`), "opened", "pings", frames.KindWrongType),
		inv("pings.resumed_array", pingResumedWith(`,"pings":[true]`), "resumed", "pings", frames.KindWrongType),
		inv("pings.bad_literal", pingResumedWith(`,"pings":tru`), "resumed", "", frames.KindSyntax),
		inv("pings.uppercase_literal", pingOpen+`,"pings":True}`, "open", "", frames.KindSyntax),
		inv("pings.duplicate", pingOpen+`,"pings":true,"pings":false}`, "open", "pings", frames.KindDuplicateKey),
		inv("pings.case_variant", pingOpen+`,"Pings":true}`, "open", "Pings", frames.KindCaseVariantKey),
		inv("pings.on_ack", `{"type":"ack","stdout":1,"pings":true}`, "ack", "pings", frames.KindUnknownField),
	}
}

func pingNoncanonical() []noncanonicalVector {
	return []noncanonicalVector{
		{"pings_false_omitted", pingOpen + `,"pings":false}`, pingOpen + `}`},
		{"pings_false_omitted_resumed", pingResumedWith(`,"pings":false`), pingResumedWith(``)},
		{"pings_first", `{"pings":true,` + strings.TrimPrefix(pingResume, "{") + `}`, pingResume + `,"pings":true}`},
		{"ping_id_first", `{"id":7,"type":"ping"}`, `{"type":"ping","id":7}`},
	}
}
