package frames_test

import (
	"github.com/procwire/procwire/frames"
)

// The vectors of terminals (PROTOCOL.md §3, "open" and "resize"): open's
// optional tty, the tty flag of opened and resumed, and the resize frame.

func ttyLines() []string {
	return []string{
		pingOpen + `,"tty":{"rows":24,"cols":80}}`,
		pingOpen + `,"tty":{"rows":1,"cols":1,"term":"xterm-256color","ypixel":65535}}`,
		pingOpen + `,"pings":true,"tty":{"rows":65535,"cols":65535,"term":"vt100","xpixel":640,"ypixel":480}}`,
		pingOpenedWith(`,"tty":true`),
		pingOpenedWith(`,"pings":true,"tty":true`),
		pingResumedWith(`,"tty":true`),
		`{"type":"resize","rows":24,"cols":80}`,
		`{"type":"resize","rows":1,"cols":65535,"xpixel":1,"ypixel":65535}`,
	}
}

func ttyInvalid() []invalidVector {
	return []invalidVector{
		inv("tty.rows_zero", pingOpen+`,"tty":{"rows":0,"cols":80}}`, "open", "tty.rows", frames.KindOutOfBounds),
		inv("tty.cols_over", pingOpen+`,"tty":{"rows":24,"cols":65536}}`, "open", "tty.cols", frames.KindOutOfBounds),
		inv("tty.missing_cols", pingOpen+`,"tty":{"rows":24}}`, "open", "tty.cols", frames.KindMissingField),
		inv("tty.not_object", pingOpen+`,"tty":true}`, "open", "tty", frames.KindWrongType),
		inv("tty.null", pingOpen+`,"tty":null}`, "open", "tty", frames.KindWrongType),
		inv("tty.term_empty", pingOpen+`,"tty":{"rows":24,"cols":80,"term":""}}`, "open", "tty.term", frames.KindOutOfBounds),
		inv("tty.term_nul", pingOpen+`,"tty":{"rows":24,"cols":80,"term":"x\u0000"}}`, "open", "tty.term", frames.KindNulByte),
		inv("tty.unknown_member", pingOpen+`,"tty":{"rows":24,"cols":80,"mode":"raw"}}`, "open", "tty.mode", frames.KindUnknownField),
		inv("tty.xpixel_negative", pingOpen+`,"tty":{"rows":24,"cols":80,"xpixel":-1}}`, "open", "tty.xpixel", frames.KindBadInteger),
		inv("tty.opened_object", pingOpenedWith(`,"tty":{"rows":24,"cols":80}`), "opened", "tty", frames.KindWrongType),
		inv("tty.resumed_string", pingResumedWith(`,"tty":"yes"`), "resumed", "tty", frames.KindWrongType),
		inv("tty.on_resume", pingResume+`,"tty":{"rows":24,"cols":80}}`, "resume", "tty", frames.KindUnknownField),
		inv("resize.missing_cols", `{"type":"resize","rows":24}`, "resize", "cols", frames.KindMissingField),
		inv("resize.missing_rows", `{"type":"resize","cols":80}`, "resize", "rows", frames.KindMissingField),
		inv("resize.rows_zero", `{"type":"resize","rows":0,"cols":80}`, "resize", "rows", frames.KindOutOfBounds),
		inv("resize.cols_over", `{"type":"resize","rows":24,"cols":65536}`, "resize", "cols", frames.KindOutOfBounds),
		inv("resize.ypixel_over", `{"type":"resize","rows":24,"cols":80,"ypixel":65536}`, "resize", "ypixel", frames.KindOutOfBounds),
		inv("resize.fraction", `{"type":"resize","rows":24.5,"cols":80}`, "resize", "rows", frames.KindBadInteger),
		inv("resize.term", `{"type":"resize","rows":24,"cols":80,"term":"vt100"}`, "resize", "term", frames.KindUnknownField),
		inv("resize.case_variant", `{"type":"resize","Rows":24,"cols":80}`, "resize", "Rows", frames.KindCaseVariantKey),
	}
}

func ttyNoncanonical() []noncanonicalVector {
	return []noncanonicalVector{
		{"tty_members_reordered", pingOpen + `,"tty":{"term":"vt100","cols":80,"rows":24}}`, pingOpen + `,"tty":{"rows":24,"cols":80,"term":"vt100"}}`},
		{"tty_zero_pixels_dropped", pingOpen + `,"tty":{"rows":24,"cols":80,"xpixel":0,"ypixel":0}}`, pingOpen + `,"tty":{"rows":24,"cols":80}}`},
		{"tty_false_dropped", pingOpenedWith(`,"tty":false`), pingOpenedWith(``)},
		{"resize_reordered", `{"cols":80,"rows":24,"type":"resize","ypixel":0}`, `{"type":"resize","rows":24,"cols":80}`},
	}
}
