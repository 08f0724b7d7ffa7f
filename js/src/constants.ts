// The wire constants of procwire.v1, the same as Go's package frames:
// frames/close.go, frames/types.go and frames/fields.go. Go generates them
// as data into frames/testdata/golden/constants.json, and
// test/constants.test.mjs checks every value here against that file (the
// name here is the Go name in UPPER_SNAKE_CASE).

/** The WebSocket subprotocol, and the evidence's wire_revision. */
export const SUBPROTOCOL = "procwire.v1";
/** The evidence's wire_revision. */
export const WIRE_REVISION = "procwire.v1";
/** The subprotocol a server selects when it took the first frame from the upgrade (PROTOCOL.md §1). */
export const SUBPROTOCOL_FIRST = "procwire.v1.first";
/** The prefix of the subprotocol that carries the first frame in the upgrade, in base64url without padding. */
export const FIRST_SUBPROTOCOL_PREFIX = "procwire.first.";

/** Largest decoded payload of one stdin/stdout/stderr frame. */
export const MAX_DATA = 262144;
/** Line limit of every frame after the first, counting its '\n'. */
export const MAX_LINE = 524288;
/** Line limit of the first frame of a connection. */
export const MAX_FIRST_LINE = 134217728;
/** Most request arguments. */
export const MAX_ARGUMENTS = 256;
/** Longest request argument, in bytes. */
export const MAX_ARGUMENT_BYTES = 65536;
/** Most environment entries. */
export const MAX_ENV_ENTRIES = 4096;
/** Most bytes of environment keys and values together. */
export const MAX_ENV_BYTES = 1 << 20;
/** Longest free string, in bytes. */
export const MAX_STRING_BYTES = 4096;
/** Smallest window an open may ask for. */
export const MIN_WINDOW = 1 << 10;
/** Largest window an open may ask for. */
export const MAX_WINDOW = 1 << 30;
/** Longest WebSocket close reason, in bytes. */
export const MAX_CLOSE_REASON = 123;
/** Longest first-frame subprotocol (prefix included) a client offers, and a server must accept. */
export const MAX_FIRST_SUBPROTOCOL = 4096;

// WebSocket close codes (PROTOCOL.md §7).
/** After destroyed, or after an error answering a first frame. */
export const CLOSE_NORMAL = 1000;
/** The server is shutting down; alone it never says the process was destroyed. */
export const CLOSE_GOING_AWAY = 1001;
/** A frame that is valid but not allowed now. */
export const CLOSE_PROTOCOL_ERROR = 1002;
/** A frame that does not decode. */
export const CLOSE_INVALID_FRAME = 1007;
/** Stdin past the credit limit. */
export const CLOSE_POLICY_VIOLATION = 1008;
/** A message over its line limit. */
export const CLOSE_MESSAGE_TOO_BIG = 1009;
/** A broken invariant of the server itself. */
export const CLOSE_INTERNAL_ERROR = 1011;
/** Another connection holds the process now. */
export const CLOSE_RESUMED_ELSEWHERE = 4001;

/** CLOSE_RESUMED_ELSEWHERE's reason for the connection a newer one took the process from. */
export const REASON_RESUMED_ELSEWHERE = "resumed elsewhere";
/** CLOSE_RESUMED_ELSEWHERE's reason for a resume or repeated open on a connection older than the holder. */
export const REASON_ATTACHED_TO_NEWER = "attached to a newer connection";
