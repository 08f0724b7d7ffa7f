package frames_test

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/klauspost/compress/s2"

	"github.com/procwire/procwire/frames"
)

// The source of testdata/golden (see golden_test.go).

const (
	evidenceJSON = `{"wire_revision":"procwire.v1","provider":"procwire","provider_revision":"0.1.0","instance_id":"inst-1","process_id":"8f3a0c1e5b7d49a2b6c4e0f1a2b3c4d5","executable":"cat","working_directory":"/tmp","arguments_digest":"sha256:5d4c9ad1cb6d76e1a7e36ba7e0e6b53d2e8e1a83b4a1d8a8b7cd43e3d1f3c0a2","started_at":"2026-11-29T09:30:00.000Z"}`
	maxInt       = "9223372036854775807"
)

// exitSignalNames are the plain names an exit frame may carry.
var exitSignalNames = strings.Fields(`SIGHUP SIGINT SIGQUIT SIGILL SIGTRAP SIGABRT SIGBUS SIGFPE
	SIGKILL SIGUSR1 SIGSEGV SIGUSR2 SIGPIPE SIGALRM SIGTERM SIGSTKFLT SIGCHLD SIGCONT SIGSTOP
	SIGTSTP SIGTTIN SIGTTOU SIGURG SIGXCPU SIGXFSZ SIGVTALRM SIGPROF SIGWINCH SIGIO SIGPWR SIGSYS`)

var errorCodes = []string{"SandboxCapabilityUnavailable", "SandboxFileTooLarge", "SandboxInstanceNotFound",
	"SandboxLifecycleConflict", "SandboxOperationFailed", "SandboxOutputLimitExceeded",
	"SandboxSnapshotForbidden", "SandboxSnapshotNotFound"}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// jsonList returns n copies of item as a JSON array body.
func jsonList(item string, n int) string { return strings.TrimSuffix(strings.Repeat(item+",", n), ",") }

// openWith returns an open frame with the given request members.
func openWith(executable, arguments, wd, env string) string {
	return `{"type":"open","instance_id":"inst-1","request":{"executable":` + executable + `,"arguments":` +
		arguments + `,"working_directory":` + wd + `,"environment":` + env + `}}`
}

func envN(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"K%04d":""`, i)
	}
	return b.String() + "}"
}

func evidenceWith(field, value string) string {
	// Replace one member's value (a string) with value.
	var b strings.Builder
	start := strings.Index(evidenceJSON, `"`+field+`":`)
	if start < 0 {
		panic(field)
	}
	vs := start + len(field) + 3
	ve := vs + 1 + strings.IndexByte(evidenceJSON[vs+1:], '"') + 1
	b.WriteString(evidenceJSON[:vs])
	b.WriteString(value)
	b.WriteString(evidenceJSON[ve:])
	return b.String()
}

func openedWith(evidence string) string {
	return `{"type":"opened","process_id":"8f3a0c1e5b7d49a2b6c4e0f1a2b3c4d5","token":"` + tok + `","evidence":` + evidence +
		`,"stdin_limit":1048576,"stdout_window":4194304,"stderr_window":65536,"grace_ms":30000,"heartbeat_ms":15000,"exit_wait_ms":1000,"max_data":262144}`
}

const tok = "3b0e8c1d2f4a6b8c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c"

// openKey is an open_key of the vectors: the same pattern as a token.
const openKey = "c0ffee00112233445566778899aabbccddeeff00112233445566778899aabbcc"

func validLines() []string {
	v := []string{
		// open
		`{"type":"open","instance_id":"inst-1","request":{"executable":"cat","arguments":["-u"],"working_directory":"/tmp","environment":{"LANG":"C.UTF-8","PATH":"/usr/bin:/bin"}},"stdout_window":4194304}`,
		`{"type":"open","instance_id":"a","request":{"executable":"/bin/true","arguments":[],"working_directory":"/","environment":{}},"stdout_window":1024,"stdin_window":1073741824}`,
		`{"type":"open","instance_id":"` + strings.Repeat("x", 128) + `","request":{"executable":"sh","arguments":["-c","printf '%s\\n' \"$X\"","","tab\there","\"quoted\" back\\slash /slash","ctl \u0001\u001f\b\f\n\r del` + "\x7f" + `","é 日本 🎉 ` + "\u2028" + `"],"working_directory":"/home/élan","environment":{"A1":"","X":"x=y","_":"\u001b[0m","a":"é"}},"stdin_window":65536}`,
		openWith(`"echo"`, `[`+jsonList(`"a"`, 256)+`]`, `"/"`, `{}`),
		openWith(`"echo"`, `["`+strings.Repeat("z", 65536)+`"]`, `"/"`, `{}`),
		openWith(`"`+strings.Repeat("e", 4096)+`"`, `[]`, `"/`+strings.Repeat("d", 4095)+`"`, envN(4096)),
		`{"type":"open","instance_id":"A.b_c:d-9","request":{"executable":"cat","arguments":[],"working_directory":"/","environment":{"BIG":"` + strings.Repeat("v", 1<<20-3) + `"}}}`,
		`{"type":"open","instance_id":"inst-1","request":{"executable":"cat","arguments":[],"working_directory":"/tmp","environment":{}},"stdout_window":4194304,"stdin_window":65536,"open_key":"` + openKey + `"}`,
		`{"type":"open","instance_id":"inst-1","request":{"executable":"cat","arguments":[],"working_directory":"/tmp","environment":{}},"open_key":"` + strings.Repeat("0", 64) + `"}`,
		// resume
		`{"type":"resume","process_id":"8f3a0c1e5b7d49a2b6c4e0f1a2b3c4d5","token":"` + tok + `","stdout_received":1048576,"stderr_received":12}`,
		`{"type":"resume","process_id":"00000000000000000000000000000000","token":"` + tok + `","stdout_received":0}`,
		// stdin
		`{"type":"stdin","off":0,"data":"aGVsbG8K"}`,
		`{"type":"stdin","off":` + maxInt + `,"data":"AA=="}`,
		`{"type":"stdin","off":1,"data":"AAE="}`,
		`{"type":"stdin","off":2,"data":"AAEC"}`,
		`{"type":"stdin","off":3,"data":"+/+/"}`,
		`{"type":"stdin_close","off":0}`,
		`{"type":"stdin_close","off":6}`,
		`{"type":"ack","stdout":0}`,
		`{"type":"ack","stdout":` + maxInt + `}`,
		`{"type":"signal","id":1,"signal":"SIGINT"}`,
		`{"type":"signal","id":2,"signal":"SIGTERM"}`,
		`{"type":"signal","id":` + maxInt + `,"signal":"SIGKILL"}`,
		`{"type":"destroy"}`,
		`{"type":"destroy","process_id":"8f3a0c1e5b7d49a2b6c4e0f1a2b3c4d5","token":"` + tok + `"}`,
		`{"type":"destroy","instance_id":"inst-1","open_key":"` + openKey + `"}`,
		// server to client
		openedWith(evidenceJSON),
		`{"type":"opened","process_id":"ffffffffffffffffffffffffffffffff","token":"` + strings.Repeat("0", 64) + `","evidence":` +
			evidenceWith("started_at", `"0000-01-01T00:00:00.000Z"`) + `,"stdin_limit":0,"stdout_window":1,"stderr_window":1,"grace_ms":0,"heartbeat_ms":0,"exit_wait_ms":0,"max_data":1}`,
		`{"type":"resumed","process_id":"8f3a0c1e5b7d49a2b6c4e0f1a2b3c4d5","evidence":` + evidenceWith("started_at", `"9999-12-31T23:59:59.999Z"`) + `,"stdin_received":5,"stdin_limit":1048581}`,
		`{"type":"resumed","process_id":"8f3a0c1e5b7d49a2b6c4e0f1a2b3c4d5","evidence":` + evidenceWith("started_at", `"2028-02-29T12:00:00.001Z"`) + `,"stdin_received":0,"stdin_limit":0}`,
		`{"type":"credit","stdin_received":6,"stdin_limit":1048582}`,
		`{"type":"credit","stdin_received":` + maxInt + `,"stdin_limit":` + maxInt + `}`,
		`{"type":"stdout","off":0,"data":"aGVsbG8K"}`,
		`{"type":"stdout","off":` + maxInt + `,"data":"/w=="}`,
		`{"type":"stdout","off":4096,"data":"` + b64(make([]byte, frames.MaxData)) + `"}`,
		`{"type":"stdout_eof","off":6}`,
		`{"type":"stdout_eof","off":0}`,
		`{"type":"stderr","off":0,"data":"d2FybmluZwo="}`,
		`{"type":"exit","code":0}`,
		`{"type":"exit","code":1}`,
		`{"type":"exit","code":255}`,
		`{"type":"exit","signal":"SIGKILL","reason":"oom"}`,
		`{"type":"signaled","id":1,"result":"delivered"}`,
		`{"type":"signaled","id":2,"result":"already_exited"}`,
		`{"type":"destroyed","process_id":"8f3a0c1e5b7d49a2b6c4e0f1a2b3c4d5"}`,
		`{"type":"error","code":"SandboxLifecycleConflict","operation":"open_process","actual":"process_already_open"}`,
		`{"type":"error","code":"SandboxLifecycleConflict","operation":"resume_process","expected":"running","actual":"process_expired"}`,
		`{"type":"error","code":"SandboxOperationFailed","operation":"resume_process","reason":"replay_gap","gap":{"requested":0,"oldest":4096}}`,
		`{"type":"error","code":"SandboxOperationFailed","operation":"open_process","reason":"executable_not_found","message":"exec: \"nope\": not found\n\tat /usr/bin ✗"}`,
		`{"type":"error","code":"SandboxCapabilityUnavailable","requirement":"process_groups"}`,
		`{"type":"error","code":"SandboxOperationFailed","operation":"signal_process","reason":"signal_failed","message":"operation not permitted","id":3}`,
		`{"type":"error","code":"SandboxOperationFailed","operation":"write_stdin","reason":"stdin_failed","id":` + maxInt + `}`,
		`{"type":"error","code":"SandboxLifecycleConflict","operation":"open_process","expected":"running","actual":"process_destroyed"}`,
	}
	for _, s := range exitSignalNames {
		v = append(v, `{"type":"exit","signal":"`+s+`"}`)
	}
	for n := range 33 {
		v = append(v, fmt.Sprintf(`{"type":"exit","signal":"SIGRTMIN+%d"}`, n))
	}
	for _, c := range errorCodes[:] {
		switch c {
		case "SandboxCapabilityUnavailable", "SandboxLifecycleConflict", "SandboxOperationFailed":
			continue // above, with their required fields
		}
		v = append(v, `{"type":"error","code":"`+c+`"}`)
	}
	v = append(v, `{"type":"error","code":"SandboxInstanceNotFound","operation":"open_process","expected":"e","actual":"a","requirement":"r","reason":"r","message":"`+strings.Repeat("m", 4096)+`","gap":{"requested":`+maxInt+`,"oldest":0},"id":1}`)
	return append(append(append(v, compressedLines()...), pingLines()...), ttyLines()...)
}

// ndjsonPayload is ACP-shaped output: JSON lines that repeat their keys.
func ndjsonPayload(lines int) []byte {
	var b strings.Builder
	for i := range lines {
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"line %d of the answer"}}}}`+"\n", i)
	}
	return []byte(b.String())
}

// s2Block returns the S2 block the encoder sends for data (which must
// compress usefully).
func s2Block(data []byte) string {
	line := frames.Append(nil, &frames.Stdout{Data: data, Enc: frames.EncS2})
	const pre = `{"type":"stdout","off":0,"data":"`
	if !strings.HasSuffix(string(line), `","enc":"s2"}`+"\n") {
		panic("payload does not compress")
	}
	return string(line[len(pre) : len(line)-len(`","enc":"s2"}`)-1])
}

// compressedLines are the valid vectors of payload compression.
func compressedLines() []string {
	return []string{
		`{"type":"open","instance_id":"inst-1","request":{"executable":"cat","arguments":[],"working_directory":"/tmp","environment":{}},"output_enc":"s2","stdin_enc":"s2"}`,
		`{"type":"open","instance_id":"inst-1","request":{"executable":"cat","arguments":[],"working_directory":"/tmp","environment":{}},"exit_reasons":"oom"}`,
		`{"type":"open","instance_id":"inst-1","request":{"executable":"cat","arguments":[],"working_directory":"/tmp","environment":{}},"limits":{"pids":100,"memory":268435456,"cpu_millicores":1500}}`,
		`{"type":"open","instance_id":"inst-1","request":{"executable":"cat","arguments":[],"working_directory":"/tmp","environment":{}},"limits":{}}`,
		openedWith(strings.TrimSuffix(evidenceJSON, "}") + `,"limits":{"pids":200,"memory":268435456}}`),
		`{"type":"open","instance_id":"inst-1","request":{"executable":"cat","arguments":[],"working_directory":"/tmp","environment":{}},"open_key":"` + openKey + `","output_enc":"zstd,s2,x123456789abcdef,a,b,c,d,e"}`,
		strings.TrimSuffix(openedWith(evidenceJSON), "}") + `,"output_enc":"s2","stdin_enc":"s2"}`,
		strings.TrimSuffix(openedWith(evidenceJSON), "}") + `,"stdin_enc":"s2"}`,
		`{"type":"stdout","off":0,"data":"` + s2Block(ndjsonPayload(40)) + `","enc":"s2"}`,
		`{"type":"stdout","off":4096,"data":"` + s2Block(make([]byte, frames.MaxData)) + `","enc":"s2"}`,
		`{"type":"stderr","off":7,"data":"` + s2Block([]byte(strings.Repeat("warning: unused variable\n", 8))) + `","enc":"s2"}`,
		`{"type":"stdin","off":12,"data":"` + s2Block(ndjsonPayload(3)) + `","enc":"s2"}`,
	}
}

// uvarint is the S2 block header declaring n bytes.
func uvarint(n uint64) []byte {
	var b []byte
	for n >= 0x80 {
		b = append(b, byte(n)|0x80)
		n >>= 7
	}
	return append(b, byte(n))
}

// compressedInvalid are the invalid vectors of payload compression: the
// bombs and broken blocks a decoder refuses before or while inflating.
func compressedInvalid() []invalidVector {
	okOpen := `{"type":"open","instance_id":"inst-1","request":{"executable":"cat","arguments":[],"working_directory":"/","environment":{}}`
	enc := func(frame, data string) string {
		return `{"type":"` + frame + `","off":0,"data":"` + data + `","enc":"s2"}`
	}
	good, _ := base64.StdEncoding.DecodeString(s2Block(ndjsonPayload(40)))
	literal := append(uvarint(3), 2<<2, 'a', 'b', 'c') // a 3-byte literal
	return []invalidVector{
		inv("bad_payload.claims_4gib", enc("stdout", b64(append(uvarint(0xffffffff), literal[1:]...))), "stdout", "data", frames.KindBadPayload),
		inv("bad_payload.claims_over_max_data", enc("stdin", b64(append(uvarint(frames.MaxData+1), literal[1:]...))), "stdin", "data", frames.KindBadPayload),
		inv("bad_payload.inflates_past_max_data", enc("stdout", b64(s2.Encode(nil, make([]byte, frames.MaxData+1)))), "stdout", "data", frames.KindBadPayload),
		inv("bad_payload.header_overflow", enc("stdout", b64([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x01})), "stdout", "data", frames.KindBadPayload),
		inv("bad_payload.header_unterminated", enc("stderr", b64([]byte{0x80, 0x80})), "stderr", "data", frames.KindBadPayload),
		inv("bad_payload.empty_block", enc("stdout", b64(uvarint(0))), "stdout", "data", frames.KindBadPayload),
		inv("bad_payload.truncated", enc("stdout", b64(good[:len(good)/2])), "stdout", "data", frames.KindBadPayload),
		inv("bad_payload.short_of_declared", enc("stdout", b64(append(uvarint(4), literal[1:]...))), "stdout", "data", frames.KindBadPayload),
		inv("bad_payload.trailing_byte", enc("stdout", b64(append(literal, 0))), "stdout", "data", frames.KindBadPayload),
		inv("bad_payload.copy_before_start", enc("stdout", b64(append(uvarint(8), 2<<2, 'a', 'b', 'c', 1|0<<2, 9))), "stdout", "data", frames.KindBadPayload),
		inv("bad_payload.repeat_without_offset", enc("stdout", b64(append(uvarint(7), 2<<2, 'a', 'b', 'c', 1, 0))), "stdout", "data", frames.KindBadPayload),
		inv("bad_payload.enc_first", `{"type":"stdin","enc":"s2","off":0,"data":"`+b64(uvarint(0))+`"}`, "stdin", "data", frames.KindBadPayload),
		inv("bad_payload.after_missing_field", `{"type":"stdout","data":"AA==","enc":"s2"}`, "stdout", "off", frames.KindMissingField),
		inv("bad_payload.before_trailing_data", enc("stdout", "AA==")+` `, "stdout", "data", frames.KindBadPayload),
		inv("bad_value.enc_zstd", `{"type":"stdout","off":0,"data":"AA==","enc":"zstd"}`, "stdout", "enc", frames.KindBadValue),
		inv("bad_value.enc_empty", `{"type":"stdin","off":0,"data":"AA==","enc":""}`, "stdin", "enc", frames.KindBadValue),
		inv("wrong_type.enc", `{"type":"stderr","off":0,"data":"AA==","enc":1}`, "stderr", "enc", frames.KindWrongType),
		inv("bad_value.output_enc_upper", okOpen+`,"output_enc":"S2"}`, "open", "output_enc", frames.KindBadValue),
		inv("bad_value.output_enc_empty", okOpen+`,"output_enc":""}`, "open", "output_enc", frames.KindBadValue),
		inv("bad_value.exit_reasons_upper", okOpen+`,"exit_reasons":"OOM"}`, "open", "exit_reasons", frames.KindBadValue),
		inv("out_of_bounds.limits_pids_zero", okOpen+`,"limits":{"pids":0}}`, "open", "limits.pids", frames.KindOutOfBounds),
		inv("unknown_field.limits_disk", okOpen+`,"limits":{"disk":1}}`, "open", "limits.disk", frames.KindUnknownField),
		inv("wrong_type.limits_array", okOpen+`,"limits":[]}`, "open", "limits", frames.KindWrongType),
		inv("bad_value.output_enc_empty_name", okOpen+`,"output_enc":"s2,"}`, "open", "output_enc", frames.KindBadValue),
		inv("bad_value.stdin_enc_space", okOpen+`,"stdin_enc":"s2, zstd"}`, "open", "stdin_enc", frames.KindBadValue),
		inv("bad_value.stdin_enc_nine_names", okOpen+`,"stdin_enc":"a,b,c,d,e,f,g,h,i"}`, "open", "stdin_enc", frames.KindBadValue),
		inv("bad_value.output_enc_long_name", okOpen+`,"output_enc":"`+strings.Repeat("a", 17)+`"}`, "open", "output_enc", frames.KindBadValue),
		inv("bad_value.opened_output_enc", strings.TrimSuffix(openedWith(evidenceJSON), "}")+`,"output_enc":"zstd"}`, "opened", "output_enc", frames.KindBadValue),
		inv("bad_value.opened_stdin_enc_list", strings.TrimSuffix(openedWith(evidenceJSON), "}")+`,"stdin_enc":"s2,s2"}`, "opened", "stdin_enc", frames.KindBadValue),
	}
}

// inv builds an invalid vector.
func inv(id, line, frame, field string, kind frames.Kind) invalidVector {
	return invalidVector{ID: id, Line: line, Error: vectorError{Frame: frame, Field: field, Kind: string(kind)}}
}

func invalidVectors() []invalidVector {
	const (
		pidOK  = `"8f3a0c1e5b7d49a2b6c4e0f1a2b3c4d5"`
		okOpen = `{"type":"open","instance_id":"inst-1","request":{"executable":"cat","arguments":[],"working_directory":"/","environment":{}}}`
	)
	ack := func(v string) string { return `{"type":"ack","stdout":` + v + `}` }
	stdout := func(data string) string { return `{"type":"stdout","off":0,"data":` + data + `}` }
	exit := func(sig string) string { return `{"type":"exit","signal":"` + sig + `"}` }
	args := func(a string) string { return openWith(`"cat"`, a, `"/"`, `{}`) }
	env := func(e string) string { return openWith(`"cat"`, `[]`, `"/"`, e) }
	errFrame := func(members string) string { return `{"type":"error",` + members + `}` }
	evidence := func(field, value string) string { return openedWith(evidenceWith(field, value)) }

	v := []invalidVector{
		// line_too_long
		{ID: "line_too_long", Line: ack("12345678901"), MaxLine: 32, Error: vectorError{Kind: "line_too_long"}},
		{ID: "line_too_long.counts_newline", Line: ack("1"), MaxLine: 25, Error: vectorError{Kind: "line_too_long"}},
		{ID: "line_too_long.before_syntax", Line: `not json at all`, MaxLine: 8, Error: vectorError{Kind: "line_too_long"}},

		// syntax
		inv("syntax.empty", ``, "", "", frames.KindSyntax),
		inv("syntax.newline_only", "\n", "", "", frames.KindSyntax),
		inv("syntax.array", `[{"type":"ack","stdout":1}]`, "", "", frames.KindSyntax),
		inv("syntax.string", `"ack"`, "", "", frames.KindSyntax),
		inv("syntax.leading_space", ` {"type":"ack","stdout":1}`, "", "", frames.KindSyntax),
		inv("syntax.bom", "\ufeff"+ack("1"), "", "", frames.KindSyntax),
		inv("syntax.single_quotes", `{'type':'ack','stdout':1}`, "", "", frames.KindSyntax),
		inv("syntax.unterminated_object", `{"type":"ack","stdout":1`, "ack", "", frames.KindSyntax),
		inv("syntax.missing_comma", `{"type":"ack" "stdout":1}`, "ack", "", frames.KindSyntax),
		inv("syntax.missing_colon", `{"type":"ack","stdout" 1}`, "ack", "", frames.KindSyntax),
		inv("syntax.trailing_comma", `{"type":"ack","stdout":1,}`, "ack", "", frames.KindSyntax),
		inv("syntax.leading_zero", ack("01"), "ack", "", frames.KindSyntax),
		inv("syntax.bare_minus", ack("-"), "ack", "", frames.KindSyntax),
		inv("syntax.bad_literal", `{"type":"signal","id":1,"signal":tru}`, "signal", "", frames.KindSyntax),
		inv("syntax.bad_escape", `{"type":"destroyed","process_id":"\x41"}`, "destroyed", "", frames.KindSyntax),
		inv("syntax.raw_control_char", `{"type":"error","code":"SandboxFileTooLarge","message":"a`+"\t"+`b"}`, "error", "", frames.KindSyntax),
		inv("syntax.newline_inside", "{\"type\":\"ack\",\n\"stdout\":1}", "ack", "", frames.KindSyntax),
		inv("syntax.lone_high_surrogate", `{"type":"error","code":"SandboxFileTooLarge","message":"\ud800"}`, "error", "", frames.KindSyntax),
		inv("syntax.lone_low_surrogate", `{"type":"error","code":"SandboxFileTooLarge","message":"\udc00x"}`, "error", "", frames.KindSyntax),
		inv("syntax.reversed_surrogates", `{"type":"error","code":"SandboxFileTooLarge","message":"\udc00\ud800"}`, "error", "", frames.KindSyntax),
		{ID: "syntax.invalid_utf8", LineBase64: base64.StdEncoding.EncodeToString([]byte(`{"type":"error","code":"SandboxFileTooLarge","message":"` + "\xff" + `"}`)),
			Error: vectorError{Frame: "error", Kind: "syntax"}},
		{ID: "syntax.utf8_surrogate", LineBase64: base64.StdEncoding.EncodeToString([]byte(`{"type":"error","code":"SandboxFileTooLarge","message":"` + "\xed\xa0\x80" + `"}`)),
			Error: vectorError{Frame: "error", Kind: "syntax"}},
		{ID: "syntax.overlong_utf8", LineBase64: base64.StdEncoding.EncodeToString([]byte(`{"type":"ack","\xc0\xaftdout":1}`)),
			Error: vectorError{Frame: "ack", Kind: "syntax"}},
		inv("syntax.before_type", `{"off":01,"type":"ack"}`, "", "", frames.KindSyntax),
		inv("syntax.nesting_too_deep", `{"x":[[[1]]],"type":"ack","stdout":1}`, "", "", frames.KindSyntax),
		inv("syntax.unterminated_string_in_integer_field", `{"type":"ack","stdout":"1`, "ack", "", frames.KindSyntax),

		// trailing_data
		inv("trailing_data.space", ack("1")+" ", "ack", "", frames.KindTrailingData),
		inv("trailing_data.crlf", ack("1")+"\r\n", "ack", "", frames.KindTrailingData),
		inv("trailing_data.two_newlines", ack("1")+"\n\n", "ack", "", frames.KindTrailingData),
		inv("trailing_data.second_object", ack("1")+ack("2"), "ack", "", frames.KindTrailingData),
		inv("trailing_data.garbage", ack("1")+"x", "ack", "", frames.KindTrailingData),

		// duplicate_key
		inv("duplicate_key", `{"type":"ack","stdout":1,"stdout":2}`, "ack", "stdout", frames.KindDuplicateKey),
		inv("duplicate_key.type", `{"type":"ack","type":"ack","stdout":1}`, "ack", "type", frames.KindDuplicateKey),
		inv("duplicate_key.type_not_first", `{"stdout":1,"type":"ack","type":"stdout"}`, "ack", "type", frames.KindDuplicateKey),
		inv("duplicate_key.escaped", `{"type":"ack","stdout":1,"std\u006fut":2}`, "ack", "stdout", frames.KindDuplicateKey),
		inv("duplicate_key.nested", `{"type":"error","code":"SandboxOperationFailed","operation":"resume_process","reason":"replay_gap","gap":{"requested":0,"requested":1,"oldest":2}}`, "error", "gap.requested", frames.KindDuplicateKey),
		inv("duplicate_key.environment", env(`{"A":"1","A":"2"}`), "open", "request.environment", frames.KindDuplicateKey),
		inv("duplicate_key.before_bad_value", `{"type":"ack","stdout":1,"stdout":-1}`, "ack", "stdout", frames.KindDuplicateKey),

		// case_variant_key
		inv("case_variant_key", `{"type":"ack","Stdout":1}`, "ack", "Stdout", frames.KindCaseVariantKey),
		inv("case_variant_key.type", `{"TYPE":"ack","type":"ack","stdout":1}`, "ack", "TYPE", frames.KindCaseVariantKey),
		inv("case_variant_key.alongside", `{"type":"stdout","off":0,"OFF":1,"data":"AA=="}`, "stdout", "OFF", frames.KindCaseVariantKey),
		inv("case_variant_key.nested", `{"type":"open","instance_id":"inst-1","request":{"Executable":"cat"}}`, "open", "request.Executable", frames.KindCaseVariantKey),
		inv("case_variant_key.type_only", `{"Type":"ack","stdout":1}`, "", "type", frames.KindMissingField),

		// unknown_type
		inv("unknown_type", `{"type":"Stdout","off":0,"data":"AA=="}`, "", "type", frames.KindUnknownType),
		inv("unknown_type.empty", `{"type":""}`, "", "type", frames.KindUnknownType),
		inv("unknown_type.not_first", `{"off":-1,"type":"stdout2"}`, "", "type", frames.KindUnknownType),
		inv("unknown_type.v2", `{"type":"window_change","rows":24}`, "", "type", frames.KindUnknownType),

		// missing_field
		inv("missing_field.type", `{"stdout":1}`, "", "type", frames.KindMissingField),
		inv("missing_field.type_empty_object", `{}`, "", "type", frames.KindMissingField),
		inv("missing_field.data", `{"type":"stdout","off":0}`, "stdout", "data", frames.KindMissingField),
		inv("missing_field.off", `{"type":"stdin","data":"AA=="}`, "stdin", "off", frames.KindMissingField),
		inv("missing_field.before_trailing_data", `{"type":"stdout","off":0}x`, "stdout", "data", frames.KindMissingField),
		inv("missing_field.first_in_order", `{"type":"credit"}`, "credit", "stdin_received", frames.KindMissingField),
		inv("missing_field.request", `{"type":"open","instance_id":"inst-1"}`, "open", "request", frames.KindMissingField),
		inv("missing_field.request.environment", `{"type":"open","instance_id":"i","request":{"executable":"cat","arguments":[],"working_directory":"/"}}`, "open", "request.environment", frames.KindMissingField),
		inv("missing_field.evidence.started_at", openedWith(strings.Replace(evidenceJSON, `,"started_at":"2026-11-29T09:30:00.000Z"`, "", 1)), "opened", "evidence.started_at", frames.KindMissingField),
		inv("missing_field.opened.max_data", strings.Replace(openedWith(evidenceJSON), `,"max_data":262144`, "", 1), "opened", "max_data", frames.KindMissingField),
		inv("missing_field.resume.token", `{"type":"resume","process_id":`+pidOK+`,"stdout_received":0}`, "resume", "token", frames.KindMissingField),
		inv("missing_field.destroy.token", `{"type":"destroy","process_id":`+pidOK+`}`, "destroy", "token", frames.KindMissingField),
		inv("missing_field.destroy.process_id", `{"type":"destroy","token":"`+tok+`"}`, "destroy", "process_id", frames.KindMissingField),
		inv("missing_field.destroy.open_key", `{"type":"destroy","instance_id":"inst-1"}`, "destroy", "open_key", frames.KindMissingField),
		inv("missing_field.destroy.instance_id", `{"type":"destroy","open_key":"`+openKey+`"}`, "destroy", "instance_id", frames.KindMissingField),
		inv("missing_field.destroy.key_before_trailing_data", `{"type":"destroy","open_key":"`+openKey+`"} `, "destroy", "instance_id", frames.KindMissingField),
		inv("missing_field.error.code", errFrame(`"message":"x"`), "error", "code", frames.KindMissingField),
		inv("missing_field.error.lifecycle_conflict.actual", errFrame(`"code":"SandboxLifecycleConflict","operation":"open_process"`), "error", "actual", frames.KindMissingField),
		inv("missing_field.error.lifecycle_conflict.operation", errFrame(`"code":"SandboxLifecycleConflict","actual":"process_not_found"`), "error", "operation", frames.KindMissingField),
		inv("missing_field.error.operation_failed.reason", errFrame(`"code":"SandboxOperationFailed","operation":"open_process"`), "error", "reason", frames.KindMissingField),
		inv("missing_field.error.capability_unavailable.requirement", errFrame(`"code":"SandboxCapabilityUnavailable"`), "error", "requirement", frames.KindMissingField),
		inv("missing_field.gap.oldest", errFrame(`"code":"SandboxOperationFailed","operation":"resume_process","reason":"replay_gap","gap":{"requested":0}`), "error", "gap.oldest", frames.KindMissingField),
		inv("missing_field.signal.signal", `{"type":"signal","id":1}`, "signal", "signal", frames.KindMissingField),

		// unknown_field
		inv("unknown_field", `{"type":"ack","stdout":1,"extra":true}`, "ack", "extra", frames.KindUnknownField),
		inv("unknown_field.first_wins", `{"type":"ack","x":1,"stdout":-1}`, "ack", "x", frames.KindUnknownField),
		inv("unknown_field.before_type", `{"x":1,"type":"ack","stdout":1}`, "ack", "x", frames.KindUnknownField),
		inv("unknown_field.near_miss", `{"type":"ack","stdout_":1}`, "ack", "stdout_", frames.KindUnknownField),
		inv("unknown_field.empty_key", `{"type":"ack","":1}`, "ack", "", frames.KindUnknownField),
		inv("unknown_field.other_frames_field", `{"type":"ack","stdout":1,"off":1}`, "ack", "off", frames.KindUnknownField),
		inv("unknown_field.request", `{"type":"open","instance_id":"i","request":{"executable":"cat","shell":true}}`, "open", "request.shell", frames.KindUnknownField),
		inv("unknown_field.gap", errFrame(`"code":"SandboxOperationFailed","operation":"resume_process","reason":"replay_gap","gap":{"requested":0,"oldest":1,"newest":2}`), "error", "gap.newest", frames.KindUnknownField),
		inv("unknown_field.evidence", openedWith(strings.Replace(evidenceJSON, `{`, `{"signature":"x",`, 1)), "opened", "evidence.signature", frames.KindUnknownField),
		inv("unknown_field.exit_status", `{"type":"exit","status":0}`, "exit", "status", frames.KindUnknownField),
		inv("unknown_field.resume_open_key", `{"type":"resume","process_id":`+pidOK+`,"token":"`+tok+`","stdout_received":0,"open_key":"`+openKey+`"}`, "resume", "open_key", frames.KindUnknownField),
		inv("unknown_field.signaled_error_id", `{"type":"signaled","id":1,"result":"delivered","error_id":1}`, "signaled", "error_id", frames.KindUnknownField),
		inv("case_variant_key.open_key", strings.TrimSuffix(okOpen, "}")+`,"Open_Key":"`+openKey+`"}`, "open", "Open_Key", frames.KindCaseVariantKey),

		// wrong_type
		inv("wrong_type.type_number", `{"type":5}`, "", "type", frames.KindWrongType),
		inv("wrong_type.type_null", `{"type":null,"stdout":1}`, "", "type", frames.KindWrongType),
		inv("wrong_type.string_for_integer", ack(`"1"`), "ack", "stdout", frames.KindWrongType),
		inv("wrong_type.null", ack(`null`), "ack", "stdout", frames.KindWrongType),
		inv("wrong_type.bool", ack(`true`), "ack", "stdout", frames.KindWrongType),
		inv("wrong_type.array_at_once", `{"type":"ack","stdout":[`, "ack", "stdout", frames.KindWrongType),
		inv("wrong_type.object", ack(`{}`), "ack", "stdout", frames.KindWrongType),
		inv("wrong_type.data_number", stdout(`12`), "stdout", "data", frames.KindWrongType),
		inv("wrong_type.data_array", stdout(`[1,2]`), "stdout", "data", frames.KindWrongType),
		inv("wrong_type.request_string", `{"type":"open","instance_id":"i","request":"cat"}`, "open", "request", frames.KindWrongType),
		inv("wrong_type.arguments_string", args(`"-u"`), "open", "request.arguments", frames.KindWrongType),
		inv("wrong_type.argument_number", args(`["-u",1]`), "open", "request.arguments", frames.KindWrongType),
		inv("wrong_type.argument_null", args(`[null]`), "open", "request.arguments", frames.KindWrongType),
		inv("wrong_type.argument_nested", args(`[["-u"]]`), "open", "request.arguments", frames.KindWrongType),
		inv("wrong_type.environment_array", env(`[]`), "open", "request.environment", frames.KindWrongType),
		inv("wrong_type.environment_value", env(`{"A":1}`), "open", "request.environment", frames.KindWrongType),
		inv("wrong_type.exit_signal_null", `{"type":"exit","signal":null}`, "exit", "signal", frames.KindWrongType),
		inv("wrong_type.exit_code_string", `{"type":"exit","code":"0"}`, "exit", "code", frames.KindWrongType),
		inv("wrong_type.exit_reason_null", `{"type":"exit","signal":"SIGKILL","reason":null}`, "exit", "reason", frames.KindWrongType),
		inv("wrong_type.gap_null", errFrame(`"code":"SandboxFileTooLarge","gap":null`), "error", "gap", frames.KindWrongType),
		inv("wrong_type.evidence_array", `{"type":"resumed","process_id":`+pidOK+`,"evidence":[]}`, "resumed", "evidence", frames.KindWrongType),

		// bad_integer
		inv("bad_integer.negative", ack("-1"), "ack", "stdout", frames.KindBadInteger),
		inv("bad_integer.negative_zero", ack("-0"), "ack", "stdout", frames.KindBadInteger),
		inv("bad_integer.fraction", ack("1.5"), "ack", "stdout", frames.KindBadInteger),
		inv("bad_integer.zero_fraction", ack("1.0"), "ack", "stdout", frames.KindBadInteger),
		inv("bad_integer.exponent", ack("1e3"), "ack", "stdout", frames.KindBadInteger),
		inv("bad_integer.exponent_signed", ack("10E+2"), "ack", "stdout", frames.KindBadInteger),
		inv("bad_integer.overflow", ack("9223372036854775808"), "ack", "stdout", frames.KindBadInteger),
		inv("bad_integer.overflow_long", ack("18446744073709551616"), "ack", "stdout", frames.KindBadInteger),
		inv("bad_integer.offset_negative", `{"type":"stdout","off":-4096,"data":"AA=="}`, "stdout", "off", frames.KindBadInteger),
		inv("bad_integer.exit_code_negative", `{"type":"exit","code":-1}`, "exit", "code", frames.KindBadInteger),
		inv("bad_integer.before_bad_base64", `{"type":"stdout","off":-1,"data":"!"}`, "stdout", "off", frames.KindBadInteger),
		inv("bad_integer.gap", errFrame(`"code":"SandboxOperationFailed","operation":"resume_process","reason":"replay_gap","gap":{"requested":-1,"oldest":0}`), "error", "gap.requested", frames.KindBadInteger),

		// bad_base64
		inv("bad_base64.unpadded", stdout(`"aGVsbG8"`), "stdout", "data", frames.KindBadBase64),
		inv("bad_base64.one_char", stdout(`"a"`), "stdout", "data", frames.KindBadBase64),
		inv("bad_base64.url_alphabet", stdout(`"-_-_"`), "stdout", "data", frames.KindBadBase64),
		inv("bad_base64.space", stdout(`"aGVs bG8="`), "stdout", "data", frames.KindBadBase64),
		inv("bad_base64.escaped_newline", stdout(`"aGVs\nbG8K"`), "stdout", "data", frames.KindBadBase64),
		inv("bad_base64.escaped_cr_padded_length", stdout(`"aGVsbG8K\r\r\r\r"`), "stdout", "data", frames.KindBadBase64),
		inv("bad_base64.nonzero_padding_bits", stdout(`"aGl="`), "stdout", "data", frames.KindBadBase64),
		inv("bad_base64.nonzero_padding_bits_2", stdout(`"/x=="`), "stdout", "data", frames.KindBadBase64),
		inv("bad_base64.padding_inside", stdout(`"AA==AA=="`), "stdout", "data", frames.KindBadBase64),
		inv("bad_base64.three_pads", stdout(`"A==="`), "stdout", "data", frames.KindBadBase64),
		inv("bad_base64.non_ascii", stdout(`"ééé="`), "stdout", "data", frames.KindBadBase64),
		inv("bad_base64.before_bad_integer", `{"type":"stdout","data":"!","off":-1}`, "stdout", "data", frames.KindBadBase64),
		inv("bad_base64.stdin", `{"type":"stdin","off":0,"data":"*"}`, "stdin", "data", frames.KindBadBase64),
		inv("bad_base64.stderr", `{"type":"stderr","off":0,"data":"AAA"}`, "stderr", "data", frames.KindBadBase64),

		// out_of_bounds
		inv("out_of_bounds.empty_data", stdout(`""`), "stdout", "data", frames.KindOutOfBounds),
		inv("out_of_bounds.data_one_over_max", `{"type":"stdin","off":0,"data":"`+b64(make([]byte, frames.MaxData+1))+`"}`, "stdin", "data", frames.KindOutOfBounds),
		inv("out_of_bounds.arguments_257", args(`[`+jsonList(`"a"`, 257)+`]`), "open", "request.arguments", frames.KindOutOfBounds),
		inv("out_of_bounds.argument_65537", args(`["`+strings.Repeat("z", 65537)+`"]`), "open", "request.arguments", frames.KindOutOfBounds),
		inv("out_of_bounds.environment_4097", env(envN(4097)), "open", "request.environment", frames.KindOutOfBounds),
		inv("out_of_bounds.environment_bytes", env(`{"BIG":"`+strings.Repeat("v", 1<<20-2)+`"}`), "open", "request.environment", frames.KindOutOfBounds),
		inv("out_of_bounds.executable_empty", openWith(`""`, `[]`, `"/"`, `{}`), "open", "request.executable", frames.KindOutOfBounds),
		inv("out_of_bounds.executable_4097", openWith(`"`+strings.Repeat("e", 4097)+`"`, `[]`, `"/"`, `{}`), "open", "request.executable", frames.KindOutOfBounds),
		inv("out_of_bounds.working_directory_4097", openWith(`"cat"`, `[]`, `"/`+strings.Repeat("d", 4096)+`"`, `{}`), "open", "request.working_directory", frames.KindOutOfBounds),
		inv("out_of_bounds.working_directory_empty_before_pattern", openWith(`"cat"`, `[]`, `""`, `{}`), "open", "request.working_directory", frames.KindOutOfBounds),
		inv("out_of_bounds.exit_code_256", `{"type":"exit","code":256}`, "exit", "code", frames.KindOutOfBounds),
		inv("out_of_bounds.signal_id_0", `{"type":"signal","id":0,"signal":"SIGINT"}`, "signal", "id", frames.KindOutOfBounds),
		inv("out_of_bounds.signaled_id_0", `{"type":"signaled","id":0,"result":"delivered"}`, "signaled", "id", frames.KindOutOfBounds),
		inv("out_of_bounds.stdout_window_1023", okOpen[:len(okOpen)-1]+`,"stdout_window":1023}`, "open", "stdout_window", frames.KindOutOfBounds),
		inv("out_of_bounds.stdin_window_over", okOpen[:len(okOpen)-1]+`,"stdin_window":1073741825}`, "open", "stdin_window", frames.KindOutOfBounds),
		inv("out_of_bounds.stdout_window_0", okOpen[:len(okOpen)-1]+`,"stdout_window":0}`, "open", "stdout_window", frames.KindOutOfBounds),
		inv("out_of_bounds.opened_max_data", strings.Replace(openedWith(evidenceJSON), `"max_data":262144`, `"max_data":262145`, 1), "opened", "max_data", frames.KindOutOfBounds),
		inv("out_of_bounds.opened_max_data_0", strings.Replace(openedWith(evidenceJSON), `"max_data":262144`, `"max_data":0`, 1), "opened", "max_data", frames.KindOutOfBounds),
		inv("out_of_bounds.opened_stdout_window_0", strings.Replace(openedWith(evidenceJSON), `"stdout_window":4194304`, `"stdout_window":0`, 1), "opened", "stdout_window", frames.KindOutOfBounds),
		inv("out_of_bounds.opened_stderr_window_0", strings.Replace(openedWith(evidenceJSON), `"stderr_window":65536`, `"stderr_window":0`, 1), "opened", "stderr_window", frames.KindOutOfBounds),
		inv("out_of_bounds.error_message_4097", errFrame(`"code":"SandboxFileTooLarge","message":"`+strings.Repeat("m", 4097)+`"`), "error", "message", frames.KindOutOfBounds),
		inv("out_of_bounds.error_operation_empty", errFrame(`"code":"SandboxLifecycleConflict","operation":"","actual":"a"`), "error", "operation", frames.KindOutOfBounds),
		inv("out_of_bounds.evidence_provider_empty", evidence("provider", `""`), "opened", "evidence.provider", frames.KindOutOfBounds),
		inv("out_of_bounds.before_bad_exit", `{"type":"exit","code":300,"signal":"SIGX"}`, "exit", "code", frames.KindOutOfBounds),
		inv("out_of_bounds.error_id_0", errFrame(`"code":"SandboxFileTooLarge","id":0`), "error", "id", frames.KindOutOfBounds),
		inv("bad_integer.error_id_negative", errFrame(`"code":"SandboxFileTooLarge","id":-1`), "error", "id", frames.KindBadInteger),
		inv("wrong_type.error_id_string", errFrame(`"code":"SandboxFileTooLarge","id":"1"`), "error", "id", frames.KindWrongType),
		inv("wrong_type.open_key_number", strings.TrimSuffix(okOpen, "}")+`,"open_key":1}`, "open", "open_key", frames.KindWrongType),

		// nul_byte
		inv("nul_byte.argument", args(`["a\u0000b"]`), "open", "request.arguments", frames.KindNulByte),
		inv("nul_byte.argument_also_too_long", args(`["`+strings.Repeat("z", 65537)+`\u0000"]`), "open", "request.arguments", frames.KindNulByte),
		inv("nul_byte.environment_value", env(`{"A":"x\u0000"}`), "open", "request.environment", frames.KindNulByte),
		inv("nul_byte.executable", openWith(`"ca\u0000t"`, `[]`, `"/"`, `{}`), "open", "request.executable", frames.KindNulByte),
		inv("nul_byte.working_directory", openWith(`"cat"`, `[]`, `"/\u0000"`, `{}`), "open", "request.working_directory", frames.KindNulByte),
		inv("nul_byte.error_message", errFrame(`"code":"SandboxFileTooLarge","message":"\u0000"`), "error", "message", frames.KindNulByte),
		inv("nul_byte.evidence_provider", evidence("provider", `"p\u0000"`), "opened", "evidence.provider", frames.KindNulByte),

		// bad_env_key
		inv("bad_env_key.leading_digit", env(`{"1A":"x"}`), "open", "request.environment", frames.KindBadEnvKey),
		inv("bad_env_key.dash", env(`{"A-B":"x"}`), "open", "request.environment", frames.KindBadEnvKey),
		inv("bad_env_key.empty", env(`{"":"x"}`), "open", "request.environment", frames.KindBadEnvKey),
		inv("bad_env_key.equals", env(`{"PATH=":"x"}`), "open", "request.environment", frames.KindBadEnvKey),
		inv("bad_env_key.non_ascii", env(`{"É":"x"}`), "open", "request.environment", frames.KindBadEnvKey),
		inv("bad_env_key.nul", env(`{"A\u0000":"x"}`), "open", "request.environment", frames.KindBadEnvKey),
		inv("bad_env_key.before_nul_value", env(`{"1":"\u0000"}`), "open", "request.environment", frames.KindBadEnvKey),

		// bad_signal
		inv("bad_signal.sighup", `{"type":"signal","id":1,"signal":"SIGHUP"}`, "signal", "signal", frames.KindBadSignal),
		inv("bad_signal.lowercase", `{"type":"signal","id":1,"signal":"sigterm"}`, "signal", "signal", frames.KindBadSignal),
		inv("bad_signal.number", `{"type":"signal","id":1,"signal":"15"}`, "signal", "signal", frames.KindBadSignal),
		inv("bad_signal.space", `{"type":"signal","id":1,"signal":"SIGTERM "}`, "signal", "signal", frames.KindBadSignal),
		inv("bad_signal.exit_unknown", exit("SIGFOO"), "exit", "signal", frames.KindBadSignal),
		inv("bad_signal.exit_rtmin_33", exit("SIGRTMIN+33"), "exit", "signal", frames.KindBadSignal),
		inv("bad_signal.exit_rtmin_leading_zero", exit("SIGRTMIN+05"), "exit", "signal", frames.KindBadSignal),
		inv("bad_signal.exit_rtmin_bare", exit("SIGRTMIN"), "exit", "signal", frames.KindBadSignal),
		inv("bad_signal.exit_rtmax", exit("SIGRTMAX"), "exit", "signal", frames.KindBadSignal),
		inv("bad_signal.exit_empty", exit(""), "exit", "signal", frames.KindBadSignal),
		inv("bad_signal.before_bad_exit", `{"type":"exit","signal":"SIGX","code":1}`, "exit", "signal", frames.KindBadSignal),

		// bad_exit
		inv("bad_exit.neither", `{"type":"exit"}`, "exit", "", frames.KindBadExit),
		inv("bad_exit.both", `{"type":"exit","code":0,"signal":"SIGKILL"}`, "exit", "", frames.KindBadExit),
		inv("bad_exit.both_signal_first", `{"type":"exit","signal":"SIGKILL","code":137}`, "exit", "", frames.KindBadExit),
		inv("bad_exit.at_key_before_value", `{"type":"exit","code":0,"signal":"SIGX"}`, "exit", "", frames.KindBadExit),

		// bad_destroy: a destroy names its process by one pair, process_id
		// and token or instance_id and open_key; a key of one pair after a key
		// of the other is refused at that key, before its value is read.
		inv("bad_destroy.both_pairs", `{"type":"destroy","process_id":`+pidOK+`,"token":"`+tok+`","instance_id":"inst-1","open_key":"`+openKey+`"}`, "destroy", "", frames.KindBadDestroy),
		inv("bad_destroy.key_pair_first", `{"type":"destroy","instance_id":"inst-1","open_key":"`+openKey+`","process_id":`+pidOK+`,"token":"`+tok+`"}`, "destroy", "", frames.KindBadDestroy),
		inv("bad_destroy.process_id_and_open_key", `{"type":"destroy","process_id":`+pidOK+`,"open_key":"`+openKey+`"}`, "destroy", "", frames.KindBadDestroy),
		inv("bad_destroy.instance_id_and_token", `{"type":"destroy","instance_id":"inst-1","token":"`+tok+`"}`, "destroy", "", frames.KindBadDestroy),
		inv("bad_destroy.at_key_before_value", `{"type":"destroy","open_key":"`+openKey+`","token":"nothex"}`, "destroy", "", frames.KindBadDestroy),
		inv("bad_destroy.before_missing_field", `{"type":"destroy","token":"`+tok+`","instance_id":"inst-1"}`, "destroy", "", frames.KindBadDestroy),
		inv("bad_destroy.type_last", `{"process_id":`+pidOK+`,"instance_id":"inst-1","type":"destroy"}`, "destroy", "", frames.KindBadDestroy),
		inv("bad_value.before_bad_destroy", `{"type":"destroy","process_id":"XYZ","open_key":"`+openKey+`"}`, "destroy", "process_id", frames.KindBadValue),
		inv("duplicate_key.before_bad_destroy", `{"type":"destroy","instance_id":"inst-1","instance_id":"inst-1","token":"`+tok+`"}`, "destroy", "instance_id", frames.KindDuplicateKey),

		// bad_timestamp
		inv("bad_timestamp.february_30", evidence("started_at", `"2026-02-30T00:00:00.000Z"`), "opened", "evidence.started_at", frames.KindBadTimestamp),
		inv("bad_timestamp.february_29_common_year", evidence("started_at", `"2026-02-29T00:00:00.000Z"`), "opened", "evidence.started_at", frames.KindBadTimestamp),
		inv("bad_timestamp.no_millis", evidence("started_at", `"2026-11-29T09:30:00Z"`), "opened", "evidence.started_at", frames.KindBadTimestamp),
		inv("bad_timestamp.micros", evidence("started_at", `"2026-11-29T09:30:00.000000Z"`), "opened", "evidence.started_at", frames.KindBadTimestamp),
		inv("bad_timestamp.offset", evidence("started_at", `"2026-11-29T09:30:00.000+00:00"`), "opened", "evidence.started_at", frames.KindBadTimestamp),
		inv("bad_timestamp.space", evidence("started_at", `"2026-11-29 09:30:00.000Z"`), "opened", "evidence.started_at", frames.KindBadTimestamp),
		inv("bad_timestamp.lowercase", evidence("started_at", `"2026-11-29t09:30:00.000z"`), "opened", "evidence.started_at", frames.KindBadTimestamp),
		inv("bad_timestamp.hour_24", evidence("started_at", `"2026-11-29T24:00:00.000Z"`), "opened", "evidence.started_at", frames.KindBadTimestamp),
		inv("bad_timestamp.leap_second", evidence("started_at", `"2016-12-31T23:59:60.000Z"`), "opened", "evidence.started_at", frames.KindBadTimestamp),
		inv("bad_timestamp.month_13", evidence("started_at", `"2026-13-01T00:00:00.000Z"`), "opened", "evidence.started_at", frames.KindBadTimestamp),
		inv("bad_timestamp.empty", evidence("started_at", `""`), "opened", "evidence.started_at", frames.KindBadTimestamp),

		// bad_digest
		inv("bad_digest.short", evidence("arguments_digest", `"sha256:`+strings.Repeat("a", 63)+`"`), "opened", "evidence.arguments_digest", frames.KindBadDigest),
		inv("bad_digest.uppercase", evidence("arguments_digest", `"sha256:`+strings.Repeat("A", 64)+`"`), "opened", "evidence.arguments_digest", frames.KindBadDigest),
		inv("bad_digest.algorithm", evidence("arguments_digest", `"sha512:`+strings.Repeat("a", 64)+`"`), "opened", "evidence.arguments_digest", frames.KindBadDigest),
		inv("bad_digest.bare_hex", evidence("arguments_digest", `"`+strings.Repeat("a", 64)+`"`), "opened", "evidence.arguments_digest", frames.KindBadDigest),

		// bad_value
		inv("bad_value.error_code", errFrame(`"code":"SandboxOops"`), "error", "code", frames.KindBadValue),
		inv("bad_value.error_code_case", errFrame(`"code":"sandboxfiletoolarge"`), "error", "code", frames.KindBadValue),
		inv("bad_value.signaled_result", `{"type":"signaled","id":1,"result":"done"}`, "signaled", "result", frames.KindBadValue),
		inv("bad_value.exit_reason", `{"type":"exit","signal":"SIGKILL","reason":"OOM"}`, "exit", "reason", frames.KindBadValue),
		inv("bad_value.process_id_uppercase", `{"type":"destroyed","process_id":"8F3A0C1E5B7D49A2B6C4E0F1A2B3C4D5"}`, "destroyed", "process_id", frames.KindBadValue),
		inv("bad_value.process_id_short", `{"type":"destroyed","process_id":"8f3a"}`, "destroyed", "process_id", frames.KindBadValue),
		inv("bad_value.process_id_nul", `{"type":"destroyed","process_id":"\u0000"}`, "destroyed", "process_id", frames.KindBadValue),
		inv("bad_value.token", `{"type":"resume","process_id":`+pidOK+`,"token":"abc","stdout_received":0}`, "resume", "token", frames.KindBadValue),
		inv("bad_value.instance_id_leading_dash", strings.Replace(okOpen, `"inst-1"`, `"-inst"`, 1), "open", "instance_id", frames.KindBadValue),
		inv("bad_value.instance_id_empty", strings.Replace(okOpen, `"inst-1"`, `""`, 1), "open", "instance_id", frames.KindBadValue),
		inv("bad_value.instance_id_129", strings.Replace(okOpen, `"inst-1"`, `"`+strings.Repeat("x", 129)+`"`, 1), "open", "instance_id", frames.KindBadValue),
		inv("bad_value.instance_id_slash", strings.Replace(okOpen, `"inst-1"`, `"a/b"`, 1), "open", "instance_id", frames.KindBadValue),
		inv("bad_value.working_directory_relative", openWith(`"cat"`, `[]`, `"tmp"`, `{}`), "open", "request.working_directory", frames.KindBadValue),
		inv("bad_value.wire_revision", evidence("wire_revision", `"procwire.v2"`), "opened", "evidence.wire_revision", frames.KindBadValue),
		inv("bad_value.evidence_instance_id", evidence("instance_id", `"a b"`), "opened", "evidence.instance_id", frames.KindBadValue),
		inv("bad_value.evidence_working_directory", evidence("working_directory", `"."`), "opened", "evidence.working_directory", frames.KindBadValue),
		inv("bad_value.open_key_uppercase", strings.TrimSuffix(okOpen, "}")+`,"open_key":"`+strings.ToUpper(openKey)+`"}`, "open", "open_key", frames.KindBadValue),
		inv("bad_value.open_key_63", strings.TrimSuffix(okOpen, "}")+`,"open_key":"`+openKey[:63]+`"}`, "open", "open_key", frames.KindBadValue),
		inv("bad_value.open_key_empty", strings.TrimSuffix(okOpen, "}")+`,"open_key":""}`, "open", "open_key", frames.KindBadValue),
		inv("bad_value.destroy_open_key", `{"type":"destroy","instance_id":"inst-1","open_key":"`+openKey+`0"}`, "destroy", "open_key", frames.KindBadValue),
		inv("bad_value.destroy_instance_id", `{"type":"destroy","instance_id":"a b","open_key":"`+openKey+`"}`, "destroy", "instance_id", frames.KindBadValue),
	}
	return append(append(append(v, compressedInvalid()...), pingInvalid()...), ttyInvalid()...)
}

func noncanonicalVectors() []noncanonicalVector {
	return append([]noncanonicalVector{
		{"type_last", `{"off":5,"data":"aGVsbG8K","type":"stdout"}`, `{"type":"stdout","off":5,"data":"aGVsbG8K"}`},
		{"whitespace", "{ \"type\" : \"ack\" ,\t\"stdout\" :\r7 }", `{"type":"ack","stdout":7}`},
		{"trailing_newline_dropped_in_canonical_compare", `{"stdout":7,"type":"ack"}` + "\n", `{"type":"ack","stdout":7}`},
		{"escaped_key_and_value", `{"type":"st\u0064out","off":0,"data":"aGVs\u0062G8K"}`, `{"type":"stdout","off":0,"data":"aGVsbG8K"}`},
		{"escaped_slash_and_unicode", `{"type":"error","code":"SandboxFileTooLarge","message":"a\/b \u00e9 \ud83c\udf89 \u007f \u001F"}`, `{"type":"error","code":"SandboxFileTooLarge","message":"a/b é 🎉 ` + "\x7f" + ` \u001f"}`},
		{"environment_order", openWith(`"cat"`, `[]`, `"/"`, `{"b":"2","B":"1","_":"3","a":"0"}`), openWith(`"cat"`, `[]`, `"/"`, `{"B":"1","_":"3","a":"0","b":"2"}`)},
		{"optional_zero_dropped", `{"type":"resume","process_id":"8f3a0c1e5b7d49a2b6c4e0f1a2b3c4d5","token":"` + tok + `","stdout_received":0,"stderr_received":0}`, `{"type":"resume","process_id":"8f3a0c1e5b7d49a2b6c4e0f1a2b3c4d5","token":"` + tok + `","stdout_received":0}`},
		{"exit_signal_before_type", `{"signal":"SIGKILL","type":"exit"}`, `{"type":"exit","signal":"SIGKILL"}`},
		{"request_members_reordered", `{"request":{"environment":{},"working_directory":"/","arguments":[ ],"executable":"cat"},"instance_id":"i","type":"open"}`, `{"type":"open","instance_id":"i","request":{"executable":"cat","arguments":[],"working_directory":"/","environment":{}}}`},
		{"open_key_first", `{"open_key":"` + openKey + `","stdin_window":65536,"type":"open","instance_id":"i","request":{"executable":"cat","arguments":[],"working_directory":"/","environment":{}}}`, `{"type":"open","instance_id":"i","request":{"executable":"cat","arguments":[],"working_directory":"/","environment":{}},"stdin_window":65536,"open_key":"` + openKey + `"}`},
		{"destroy_key_pair_reordered", `{"open_key":"` + openKey + `", "instance_id":"inst-1","type":"destroy"}`, `{"type":"destroy","instance_id":"inst-1","open_key":"` + openKey + `"}`},
		{"error_id_first", `{"id":7,"type":"error","reason":"signal_failed","operation":"signal_process","code":"SandboxOperationFailed"}`, `{"type":"error","code":"SandboxOperationFailed","operation":"signal_process","reason":"signal_failed","id":7}`},
		{"escaped_control_uppercase_hex", `{"type":"open","instance_id":"i","request":{"executable":"cat","arguments":["\u001B\u0008"],"working_directory":"/","environment":{}}}`, `{"type":"open","instance_id":"i","request":{"executable":"cat","arguments":["\u001b\b"],"working_directory":"/","environment":{}}}`},
	}, append(pingNoncanonical(), ttyNoncanonical()...)...)
}
