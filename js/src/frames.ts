// The procwire.v1 frames and their strict codec (PROTOCOL.md §2, §3, §8).
//
// Every frame is described once, as a table of fields in canonical order;
// the decoder, the encoder and validate walk these tables. A new optional
// field is one row in a table (and, for a cross-field rule, a line in
// onKey or atEnd). The decoder is a port of the Go decoder in frames/: it
// reads the line's bytes from the left and reports the first broken rule
// with the same frame, field and kind, which the golden vectors pin.

import {
  MAX_ARGUMENT_BYTES,
  MAX_ARGUMENTS,
  MAX_DATA,
  MAX_ENV_BYTES,
  MAX_ENV_ENTRIES,
  MAX_LINE,
  MAX_STRING_BYTES,
  MAX_WINDOW,
  MIN_WINDOW,
  WIRE_REVISION,
} from "./constants.js";

export * from "./constants.js";

/**
 * An integer of the wire: 0 ..= 2^63-1. A `number` when it is a safe
 * integer, a `bigint` above Number.MAX_SAFE_INTEGER.
 */
export type Int = number | bigint;

/** The contract's SandboxProcessRequest. */
export interface ProcessRequest {
  executable: string;
  arguments: string[];
  working_directory: string;
  /** The child's entire environment. */
  environment: Record<string, string>;
}

/** The contract's SandboxProcessEvidence, authored by the server. */
export interface Evidence {
  wire_revision: string;
  provider: string;
  provider_revision: string;
  instance_id: string;
  process_id: string;
  executable: string;
  working_directory: string;
  arguments_digest: string;
  started_at: string;
  /** The limits in force; sent only when the open carried limits. */
  limits?: Limits;
}

/** Limits on a process's tree: asked for in open, in force in evidence; an absent member is no limit. */
export interface Limits {
  pids?: Int;
  memory?: Int;
  cpu_millicores?: Int;
}

/** The gap of a replay_gap error. */
export interface Gap {
  requested: Int;
  oldest: Int;
}

/** open's request for a pseudo-terminal (PROTOCOL.md §3, "open"). */
export interface TTYRequest {
  /** 1 ..= 65535. */
  rows: Int;
  /** 1 ..= 65535. */
  cols: Int;
  /** Becomes TERM unless the request's environment sets TERM. */
  term?: string;
  /** Window size in pixels, 0 ..= 65535; absent: unknown. */
  xpixel?: Int;
  ypixel?: Int;
}

export interface OpenFrame {
  type: "open";
  instance_id: string;
  request: ProcessRequest;
  stdout_window?: Int;
  stdin_window?: Int;
  /** 64 lowercase hex digits (256 random bits, secret): makes the open repeatable. */
  open_key?: string;
  /** Encodings the client decodes in stdout/stderr, comma-separated ("s2"). This client lists "s2" with options.compress. */
  output_enc?: string;
  /** Encodings the client may send stdin in, comma-separated. This client lists none (it has no compressor). */
  stdin_enc?: string;
  /** Asks for application-level pings on this connection (ping/pong frames); for a peer that cannot see WebSocket pings. */
  pings?: boolean;
  /** Exit reasons the client understands, comma-separated ("oom"); exit carries reason only when listed. */
  exit_reasons?: string;
  /** Tighter limits asked for the process's tree; with it, even {}, evidence says the limits in force. */
  limits?: Limits;
  /** Runs the process on a new pseudo-terminal of this size; absent: pipes. */
  tty?: TTYRequest;
}
export interface ResumeFrame {
  type: "resume";
  process_id: string;
  token: string;
  stdout_received: Int;
  stderr_received?: Int;
  /** Asks for application-level pings on this connection (ping/pong frames); for a peer that cannot see WebSocket pings. */
  pings?: boolean;
}
export interface StdinFrame {
  type: "stdin";
  off: Int;
  /** The payload as carried: with enc "s2", one S2 block (see inflateS2), otherwise the bytes themselves. */
  data: Uint8Array;
  /** "s2": data is compressed (PROTOCOL.md §5, "Compression"); absent: raw. */
  enc?: string;
}
export interface StdinCloseFrame {
  type: "stdin_close";
  off: Int;
}
export interface AckFrame {
  type: "ack";
  stdout: Int;
}
export interface SignalFrame {
  type: "signal";
  id: Int;
  signal: string;
}
export interface DestroyFrame {
  type: "destroy";
  process_id?: string;
  token?: string;
  /** With open_key: names the process by the open that started it. */
  instance_id?: string;
  open_key?: string;
}
export interface OpenedFrame {
  type: "opened";
  process_id: string;
  token: string;
  evidence: Evidence;
  stdin_limit: Int;
  stdout_window: Int;
  stderr_window: Int;
  grace_ms: Int;
  heartbeat_ms: Int;
  exit_wait_ms: Int;
  max_data: Int;
  /** "s2" when the server may compress stdout/stderr; one the open listed. */
  output_enc?: string;
  /** "s2" when the client may compress stdin. */
  stdin_enc?: string;
  /** true: the server answers ping frames on this connection (only when the client asked). */
  pings?: boolean;
  /** true: the process runs on a pseudo-terminal (stdout carries all it writes, no stderr). */
  tty?: boolean;
}
export interface ResumedFrame {
  type: "resumed";
  process_id: string;
  evidence: Evidence;
  stdin_received: Int;
  stdin_limit: Int;
  /** true: the server answers ping frames on this connection (only when the client asked). */
  pings?: boolean;
  /** true: the process runs on a pseudo-terminal (stdout carries all it writes, no stderr). */
  tty?: boolean;
}
export interface CreditFrame {
  type: "credit";
  stdin_received: Int;
  stdin_limit: Int;
}
export interface StdoutFrame {
  type: "stdout";
  off: Int;
  /** The payload as carried: with enc "s2", one S2 block (see inflateS2), otherwise the bytes themselves. */
  data: Uint8Array;
  /** "s2": data is compressed (PROTOCOL.md §5, "Compression"); absent: raw. */
  enc?: string;
}
export interface StdoutEOFFrame {
  type: "stdout_eof";
  off: Int;
}
export interface StderrFrame {
  type: "stderr";
  off: Int;
  /** The payload as carried: with enc "s2", one S2 block (see inflateS2), otherwise the bytes themselves. */
  data: Uint8Array;
  /** "s2": data is compressed (PROTOCOL.md §5, "Compression"); absent: raw. */
  enc?: string;
}
export interface ExitFrame {
  type: "exit";
  code?: Int;
  signal?: string;
  /** Why the process ended, when the server knows: "oom" (the OOM killer; signal is SIGKILL). */
  reason?: string;
}
export interface SignaledFrame {
  type: "signaled";
  id: Int;
  result: string;
}
export interface DestroyedFrame {
  type: "destroyed";
  process_id: string;
}
export interface ErrorFrame {
  type: "error";
  code: string;
  operation?: string;
  expected?: string;
  actual?: string;
  requirement?: string;
  reason?: string;
  message?: string;
  gap?: Gap;
  /** The id of the signal this error answers. */
  id?: Int;
}

/**
 * An application-level ping (PROTOCOL.md): sent by a client that asked for
 * pings in its open or resume and was granted them; the server answers
 * with a pong of the same id.
 */
export interface PingFrame {
  type: "ping";
  /** 0 ..= 2^53-1. */
  id: number;
}
/** The server's answer to a ping, with its id. */
export interface PongFrame {
  type: "pong";
  id: number;
}

/**
 * Sets the window size of a session's terminal (C→S, only on a session
 * with a tty); not answered.
 */
export interface ResizeFrame {
  type: "resize";
  /** 1 ..= 65535. */
  rows: Int;
  /** 1 ..= 65535. */
  cols: Int;
  /** 0 ..= 65535; absent: unknown. */
  xpixel?: Int;
  ypixel?: Int;
}

/** Any procwire.v1 frame. */
export type Frame =
  | OpenFrame
  | ResumeFrame
  | StdinFrame
  | StdinCloseFrame
  | AckFrame
  | SignalFrame
  | DestroyFrame
  | OpenedFrame
  | ResumedFrame
  | CreditFrame
  | StdoutFrame
  | StdoutEOFFrame
  | StderrFrame
  | ExitFrame
  | SignaledFrame
  | DestroyedFrame
  | ErrorFrame
  | PingFrame
  | PongFrame
  | ResizeFrame;

/** The wire name of a frame type. */
export type FrameType = Frame["type"];

/** Frame types a client sends. */
export const CLIENT_FRAMES: ReadonlySet<string> = new Set([
  "open", "resume", "stdin", "stdin_close", "ack", "signal", "destroy", "ping", "resize",
]);

/** The kinds of decode error (PROTOCOL.md §8). */
export type Kind =
  | "line_too_long"
  | "syntax"
  | "trailing_data"
  | "duplicate_key"
  | "case_variant_key"
  | "unknown_type"
  | "missing_field"
  | "unknown_field"
  | "wrong_type"
  | "bad_integer"
  | "bad_base64"
  | "out_of_bounds"
  | "nul_byte"
  | "bad_env_key"
  | "bad_signal"
  | "bad_exit"
  | "bad_destroy"
  | "bad_timestamp"
  | "bad_digest"
  | "bad_value"
  | "bad_payload";

/**
 * A refused frame: the frame type when known, the field as a dotted path
 * (empty for the whole line) and the kind of the first rule broken.
 */
export class DecodeError extends Error {
  override name = "DecodeError";
  constructor(
    readonly frame: string,
    readonly field: string,
    readonly kind: Kind,
    readonly detail = "",
  ) {
    let m = frame;
    if (field !== "") m += (frame !== "" ? "." : "") + field;
    if (m !== "") m += ": ";
    m += kind;
    if (detail !== "") m += ": " + detail;
    super(m);
  }
}

// ---- the tables ------------------------------------------------------------

type Rule =
  | "type"
  | "int"
  | "text"
  | "path"
  | "instance_id"
  | "process_id"
  | "token"
  | "digest"
  | "time"
  | "wire"
  | "signal"
  | "exit_signal"
  | "exit_reason"
  | "result"
  | "error_code"
  | "data"
  | "enc_list"
  | "enc"
  | "args"
  | "env"
  | "bool"
  | "object";

interface Field {
  name: string;
  rule: Rule;
  req: boolean;
  min: bigint;
  max: bigint;
  sub?: Schema;
}

interface Schema {
  name: string;
  frame: boolean;
  fields: Field[];
  index: Map<string, number>;
}

const MAX_INT64 = 9223372036854775807n;
/** Largest id of a ping and its pong: 2^53-1, exact in every JSON number. */
const MAX_PING_ID = 9007199254740991n;

function f(name: string, rule: Rule, req: boolean, min = 0n, max = MAX_INT64, sub?: Schema): Field {
  return { name, rule, req, min, max, sub };
}
const offset = (name: string) => f(name, "int", true);
const intIn = (name: string, req: boolean, min: bigint, max: bigint) => f(name, "int", req, min, max);
const str = (name: string, rule: Rule, req: boolean) => f(name, rule, req);
const obj = (name: string, sub: Schema, req: boolean) => f(name, "object", req, 0n, 0n, sub);

function schema(name: string, frame: boolean, fields: Field[]): Schema {
  const all = frame ? [f("type", "type", true), ...fields] : fields;
  return { name, frame, fields: all, index: new Map(all.map((x, i) => [x.name, i])) };
}

const gapSchema = schema("gap", false, [offset("requested"), offset("oldest")]);
const limitsSchema = schema("limits", false, [
  intIn("pids", false, 1n, MAX_INT64),
  intIn("memory", false, 1n, MAX_INT64),
  intIn("cpu_millicores", false, 1n, MAX_INT64),
]);
const ttySchema = schema("tty", false, [
  intIn("rows", true, 1n, 65535n),
  intIn("cols", true, 1n, 65535n),
  str("term", "text", false),
  intIn("xpixel", false, 0n, 65535n),
  intIn("ypixel", false, 0n, 65535n),
]);
const requestSchema = schema("request", false, [
  str("executable", "text", true),
  f("arguments", "args", true),
  str("working_directory", "path", true),
  f("environment", "env", true),
]);
const evidenceSchema = schema("evidence", false, [
  str("wire_revision", "wire", true),
  str("provider", "text", true),
  str("provider_revision", "text", true),
  str("instance_id", "instance_id", true),
  str("process_id", "process_id", true),
  str("executable", "text", true),
  str("working_directory", "path", true),
  str("arguments_digest", "digest", true),
  str("started_at", "time", true),
  obj("limits", limitsSchema, false),
]);

/** Evidence field names in canonical order. */
export const EVIDENCE_FIELDS: readonly (keyof Evidence)[] = evidenceSchema.fields.map(
  (x) => x.name as keyof Evidence,
);

const WIN_MIN = BigInt(MIN_WINDOW);
const WIN_MAX = BigInt(MAX_WINDOW);

const schemas: Record<string, Schema> = {};
for (const s of [
  schema("open", true, [
    str("instance_id", "instance_id", true),
    obj("request", requestSchema, true),
    intIn("stdout_window", false, WIN_MIN, WIN_MAX),
    intIn("stdin_window", false, WIN_MIN, WIN_MAX),
    str("open_key", "token", false),
    str("output_enc", "enc_list", false),
    str("stdin_enc", "enc_list", false),
    f("pings", "bool", false),
    str("exit_reasons", "enc_list", false),
    obj("limits", limitsSchema, false),
    obj("tty", ttySchema, false),
  ]),
  schema("resume", true, [
    str("process_id", "process_id", true),
    str("token", "token", true),
    offset("stdout_received"),
    intIn("stderr_received", false, 0n, MAX_INT64),
    f("pings", "bool", false),
  ]),
  schema("stdin", true, [offset("off"), f("data", "data", true), str("enc", "enc", false)]),
  schema("stdin_close", true, [offset("off")]),
  schema("ack", true, [offset("stdout")]),
  schema("signal", true, [intIn("id", true, 1n, MAX_INT64), str("signal", "signal", true)]),
  schema("destroy", true, [
    str("process_id", "process_id", false),
    str("token", "token", false),
    str("instance_id", "instance_id", false),
    str("open_key", "token", false),
  ]),
  schema("opened", true, [
    str("process_id", "process_id", true),
    str("token", "token", true),
    obj("evidence", evidenceSchema, true),
    offset("stdin_limit"),
    intIn("stdout_window", true, 1n, MAX_INT64),
    intIn("stderr_window", true, 1n, MAX_INT64),
    offset("grace_ms"),
    offset("heartbeat_ms"),
    offset("exit_wait_ms"),
    intIn("max_data", true, 1n, BigInt(MAX_DATA)),
    str("output_enc", "enc", false),
    str("stdin_enc", "enc", false),
    f("pings", "bool", false),
    f("tty", "bool", false),
  ]),
  schema("resumed", true, [
    str("process_id", "process_id", true),
    obj("evidence", evidenceSchema, true),
    offset("stdin_received"),
    offset("stdin_limit"),
    f("pings", "bool", false),
    f("tty", "bool", false),
  ]),
  schema("credit", true, [offset("stdin_received"), offset("stdin_limit")]),
  schema("stdout", true, [offset("off"), f("data", "data", true), str("enc", "enc", false)]),
  schema("stdout_eof", true, [offset("off")]),
  schema("stderr", true, [offset("off"), f("data", "data", true), str("enc", "enc", false)]),
  schema("exit", true, [intIn("code", false, 0n, 255n), str("signal", "exit_signal", false), str("reason", "exit_reason", false)]),
  schema("signaled", true, [intIn("id", true, 1n, MAX_INT64), str("result", "result", true)]),
  schema("destroyed", true, [str("process_id", "process_id", true)]),
  schema("error", true, [
    str("code", "error_code", true),
    str("operation", "text", false),
    str("expected", "text", false),
    str("actual", "text", false),
    str("requirement", "text", false),
    str("reason", "text", false),
    str("message", "text", false),
    obj("gap", gapSchema, false),
    intIn("id", false, 1n, MAX_INT64),
  ]),
  schema("ping", true, [intIn("id", true, 0n, MAX_PING_ID)]),
  schema("pong", true, [intIn("id", true, 0n, MAX_PING_ID)]),
  schema("resize", true, [
    intIn("rows", true, 1n, 65535n),
    intIn("cols", true, 1n, 65535n),
    intIn("xpixel", false, 0n, 65535n),
    intIn("ypixel", false, 0n, 65535n),
  ]),
]) {
  schemas[s.name] = s;
}

/** The frame type names of v1. */
export const FRAME_TYPES: readonly string[] = Object.keys(schemas);

/** The closed vocabulary of error codes. */
export const ERROR_CODES: ReadonlySet<string> = new Set([
  "SandboxCapabilityUnavailable",
  "SandboxFileTooLarge",
  "SandboxInstanceNotFound",
  "SandboxLifecycleConflict",
  "SandboxOperationFailed",
  "SandboxOutputLimitExceeded",
  "SandboxSnapshotForbidden",
  "SandboxSnapshotNotFound",
]);

/** The fields an error frame with this code requires besides code. */
function errorRequires(code: string): string[] {
  switch (code) {
    case "SandboxLifecycleConflict":
      return ["operation", "actual"];
    case "SandboxOperationFailed":
      return ["operation", "reason"];
    case "SandboxCapabilityUnavailable":
      return ["requirement"];
  }
  return [];
}

// Cross-field rules met when field i appears, given the fields seen before.
function onKey(s: Schema, seen: Set<string>, name: string): DecodeError | undefined {
  if (s.name === "exit" && s.frame) {
    if ((name === "code" && seen.has("signal")) || (name === "signal" && seen.has("code"))) {
      return new DecodeError("exit", "", "bad_exit", "both code and signal");
    }
  }
  if (s.name === "destroy" && s.frame) {
    const byProcess = seen.has("process_id") || seen.has("token");
    const byKey = seen.has("instance_id") || seen.has("open_key");
    if (((name === "process_id" || name === "token") && byKey) || ((name === "instance_id" || name === "open_key") && byProcess)) {
      return new DecodeError("destroy", "", "bad_destroy", name + " with a field of the other pair");
    }
  }
  return undefined;
}

// Rules met at the end of an object: missing required fields in table
// order, then the frame's cross-field rules.
function atEnd(s: Schema, o: Record<string, unknown>, seen: Set<string>, parent: string, frame: string): DecodeError | undefined {
  for (const fd of s.fields) {
    if (fd.req && !seen.has(fd.name)) return new DecodeError(frame, join(parent, fd.name), "missing_field");
  }
  if (!s.frame) return undefined;
  switch (s.name) {
    case "exit":
      if (!seen.has("code") && !seen.has("signal")) {
        return new DecodeError(frame, "", "bad_exit", "neither code nor signal");
      }
      break;
    case "destroy": {
      const p = seen.has("process_id");
      const t = seen.has("token");
      if (p && !t) return new DecodeError(frame, "token", "missing_field", "process_id without token");
      if (t && !p) return new DecodeError(frame, "process_id", "missing_field", "token without process_id");
      const n = seen.has("instance_id");
      const k = seen.has("open_key");
      if (n && !k) return new DecodeError(frame, "open_key", "missing_field", "instance_id without open_key");
      if (k && !n) return new DecodeError(frame, "instance_id", "missing_field", "open_key without instance_id");
      break;
    }
    case "error":
      for (const name of errorRequires(o.code as string)) {
        if (!seen.has(name)) return new DecodeError(frame, name, "missing_field", "required with " + o.code);
      }
      break;
    case "stdin":
    case "stdout":
    case "stderr":
      if (seen.has("enc") && o.data instanceof Uint8Array && typeof inflateS2(o.data, MAX_DATA) === "string") {
        return new DecodeError(frame, "data", "bad_payload", "not an s2 block of 1.." + MAX_DATA + " bytes");
      }
      break;
  }
  return undefined;
}

function join(parent: string, name: string): string {
  return parent === "" ? name : parent + "." + name;
}

// ---- value rules ------------------------------------------------------------

const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
const isAlnum = (c: number) => isDigit(c) || (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a);

function isLowerHex(b: Uint8Array, from: number, n: number): boolean {
  if (b.length - from !== n) return false;
  for (let i = from; i < b.length; i++) {
    const c = b[i]!;
    if (!isDigit(c) && (c < 0x61 || c > 0x66)) return false;
  }
  return true;
}

function validInstanceID(b: Uint8Array): boolean {
  if (b.length === 0 || b.length > 128 || !isAlnum(b[0]!)) return false;
  for (let i = 1; i < b.length; i++) {
    const c = b[i]!;
    if (!isAlnum(c) && c !== 0x2e && c !== 0x5f && c !== 0x3a && c !== 0x2d) return false;
  }
  return true;
}

function validEnvKey(b: Uint8Array): boolean {
  if (b.length === 0 || isDigit(b[0]!)) return false;
  for (const c of b) if (!isAlnum(c) && c !== 0x5f) return false;
  return true;
}

const SHA256_PREFIX = [0x73, 0x68, 0x61, 0x32, 0x35, 0x36, 0x3a]; // "sha256:"

function validDigest(b: Uint8Array): boolean {
  if (b.length !== 71) return false;
  for (let i = 0; i < 7; i++) if (b[i] !== SHA256_PREFIX[i]) return false;
  return isLowerHex(b, 7, 64);
}

const TIME_RE = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z$/;

/** Whether s is a canonical timestamp "YYYY-MM-DDTHH:MM:SS.mmmZ". */
export function validTimestamp(s: string): boolean {
  const m = TIME_RE.exec(s);
  if (!m) return false;
  const [y, mo, d, h, mi, se] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  if (mo < 1 || mo > 12 || h > 23 || mi > 59 || se > 59 || d < 1) return false;
  const leap = y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][mo - 1]!;
  return d <= days;
}

const EXIT_SIGNALS = new Set(
  ("SIGHUP SIGINT SIGQUIT SIGILL SIGTRAP SIGABRT SIGBUS SIGFPE SIGKILL SIGUSR1 SIGSEGV SIGUSR2 " +
    "SIGPIPE SIGALRM SIGTERM SIGSTKFLT SIGCHLD SIGCONT SIGSTOP SIGTSTP SIGTTIN SIGTTOU SIGURG " +
    "SIGXCPU SIGXFSZ SIGVTALRM SIGPROF SIGWINCH SIGIO SIGPWR SIGSYS").split(" "),
);

/** Whether name may be the signal of an exit frame. */
export function validExitSignal(name: string): boolean {
  if (EXIT_SIGNALS.has(name)) return true;
  const m = /^SIGRTMIN\+(0|[1-9][0-9]?)$/.exec(name);
  return m !== null && Number(m[1]) <= 32;
}

/** The signals a client may send. */
export const SIGNALS: ReadonlySet<string> = new Set(["SIGINT", "SIGTERM", "SIGKILL"]);

const latin1 = new TextDecoder("latin1");
const utf8 = new TextDecoder("utf-8");
const encoder = new TextEncoder();

function asText(b: Uint8Array): string {
  for (const c of b) if (c >= 0x80) return utf8.decode(b);
  return latin1.decode(b);
}

// checkString applies a string rule to a value's bytes: nul_byte, then
// out_of_bounds, then the pattern or vocabulary.
function checkString(rule: Rule, b: Uint8Array): Kind | "" {
  switch (rule) {
    case "text":
    case "path":
      if (b.indexOf(0) >= 0) return "nul_byte";
      if (b.length === 0 || b.length > MAX_STRING_BYTES) return "out_of_bounds";
      if (rule === "path" && b[0] !== 0x2f) return "bad_value";
      return "";
    case "instance_id":
      return validInstanceID(b) ? "" : "bad_value";
    case "process_id":
      return isLowerHex(b, 0, 32) ? "" : "bad_value";
    case "token":
      return isLowerHex(b, 0, 64) ? "" : "bad_value";
    case "digest":
      return validDigest(b) ? "" : "bad_digest";
    case "time":
      return b.length === 24 && validTimestamp(asText(b)) ? "" : "bad_timestamp";
    case "wire":
      return asText(b) === WIRE_REVISION ? "" : "bad_value";
    case "signal":
      return SIGNALS.has(asText(b)) ? "" : "bad_signal";
    case "exit_signal":
      return validExitSignal(asText(b)) ? "" : "bad_signal";
    case "result":
      return ["delivered", "already_exited"].includes(asText(b)) ? "" : "bad_value";
    case "exit_reason":
      return asText(b) === "oom" ? "" : "bad_value";
    case "error_code":
      return ERROR_CODES.has(asText(b)) ? "" : "bad_value";
    case "enc_list":
      return ENC_LIST_RE.test(asText(b)) ? "" : "bad_value";
    case "enc":
      return asText(b) === "s2" ? "" : "bad_value";
  }
  return "";
}

const ENC_LIST_RE = /^[a-z0-9]{1,16}(,[a-z0-9]{1,16}){0,7}$/;

// ---- s2 ------------------------------------------------------------------------

/**
 * Inflates one S2 block (github.com/klauspost/compress/s2, a superset of a
 * Snappy block) of at most max bytes. The declared length is checked
 * against max before anything is allocated. Returns the bytes, or a string
 * saying why the block is refused (bad_payload).
 */
export function inflateS2(src: Uint8Array, max: number): Uint8Array | string {
  let n = 0;
  let s = 0;
  for (let shift = 0; ; shift += 7) {
    if (s >= src.length || s === 5) return "malformed header";
    const c = src[s++]!;
    n += (c & 0x7f) * 2 ** shift;
    if (c < 0x80) break;
  }
  if (n > 0xffffffff) return "malformed header";
  if (n === 0 || n > max) return `declares ${n} bytes, limit ${max}`;
  const dst = new Uint8Array(n);
  let d = 0;
  let offset = 0;
  while (s < src.length) {
    const tag = src[s]!;
    let length: number;
    if ((tag & 3) === 0) {
      let x = tag >> 2;
      if (x >= 60) {
        const k = x - 59;
        if (s + 1 + k > src.length) return "truncated literal";
        x = 0;
        for (let j = 0; j < k; j++) x += src[s + 1 + j]! * 2 ** (8 * j);
        s += 1 + k;
      } else {
        s++;
      }
      length = x + 1;
      if (length > n - d || length > src.length - s) return "literal past the end";
      dst.set(src.subarray(s, s + length), d);
      d += length;
      s += length;
      continue;
    }
    if ((tag & 3) === 1) {
      if (s + 2 > src.length) return "truncated copy";
      const toff = ((tag & 0xe0) << 3) | src[s + 1]!;
      length = (tag >> 2) & 7;
      s += 2;
      if (toff === 0) {
        // repeat the last offset
        if (length === 5) {
          if (s + 1 > src.length) return "truncated repeat";
          length = src[s]! + 4;
          s += 1;
        } else if (length === 6) {
          if (s + 2 > src.length) return "truncated repeat";
          length = (src[s]! | (src[s + 1]! << 8)) + (1 << 8);
          s += 2;
        } else if (length === 7) {
          if (s + 3 > src.length) return "truncated repeat";
          length = (src[s]! | (src[s + 1]! << 8) | (src[s + 2]! << 16)) + (1 << 16);
          s += 3;
        }
      } else {
        offset = toff;
      }
      length += 4;
    } else if ((tag & 3) === 2) {
      if (s + 3 > src.length) return "truncated copy";
      length = 1 + (tag >> 2);
      offset = src[s + 1]! | (src[s + 2]! << 8);
      s += 3;
    } else {
      if (s + 5 > src.length) return "truncated copy";
      length = 1 + (tag >> 2);
      offset = src[s + 1]! + src[s + 2]! * 2 ** 8 + src[s + 3]! * 2 ** 16 + src[s + 4]! * 2 ** 24;
      s += 5;
    }
    if (offset <= 0 || d < offset || length > n - d) return "copy out of range";
    for (let j = 0; j < length; j++) dst[d + j] = dst[d - offset + j]!;
    d += length;
  }
  if (d !== n) return `inflates to ${d} bytes, declares ${n}`;
  return dst;
}

// ---- base64 ----------------------------------------------------------------

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64_VAL = new Int16Array(256).fill(-1);
for (let i = 0; i < 64; i++) B64_VAL[B64.charCodeAt(i)] = i;
// B64_PAIR maps two base64 characters to their 12 bits, or -1.
const B64_PAIR = new Int16Array(65536).fill(-1);
for (let i = 0; i < 64; i++) for (let j = 0; j < 64; j++) B64_PAIR[(B64.charCodeAt(i) << 8) | B64.charCodeAt(j)] = (i << 6) | j;
const EQ = 0x3d;

const NodeBuffer = (globalThis as { Buffer?: typeof import("node:buffer").Buffer }).Buffer;

// indexOfByte is b.indexOf(byte, from), with Buffer's memchr where there is
// one (Uint8Array's own indexOf is a loop, tens of µs on a 64 KiB frame).
const bufferIndexOf = NodeBuffer?.prototype.indexOf as ((this: Uint8Array, v: number, from?: number) => number) | undefined;
function indexOfByte(b: Uint8Array, byte: number, from = 0): number {
  return bufferIndexOf ? bufferIndexOf.call(b, byte, from) : b.indexOf(byte, from);
}

const fromBase64 = (Uint8Array as unknown as { fromBase64?: (s: string, o: object) => Uint8Array }).fromBase64;
const WHITESPACE = /[\t\n\f\r ]/;

// decodeBase64 decodes padded standard base64 strictly (padding bits zero,
// nothing outside the alphabet), or returns undefined. Natively where it
// can: with Node's Buffer, whose decoder is lenient, the input is held to
// the strict form around it (see decodeBase64Node); with
// Uint8Array.fromBase64 in strict mode (browsers, Deno, Bun without
// Buffer), which refuses all but the whitespace it skips; else in
// JavaScript. Each result owns its ArrayBuffer (never a slice of Buffer's
// shared pool), so a byte stream may transfer it.
function decodeBase64(b: Uint8Array): Uint8Array | undefined {
  const n = b.length;
  if (n % 4 !== 0) return undefined;
  if (n === 0) return new Uint8Array(0);
  if (NodeBuffer) return decodeBase64Node(NodeBuffer, b);
  if (fromBase64 && n > 64) {
    const s = latin1.decode(b);
    if (WHITESPACE.test(s)) return undefined;
    try {
      return fromBase64(s, { lastChunkHandling: "strict" });
    } catch {
      return undefined;
    }
  }
  return decodeBase64JS(b);
}

// decodeBase64Node decodes b (its length a multiple of 4) with Buffer.
// Buffer's decoder also takes the URL-safe alphabet ("-", "_"), which is
// refused here; it skips or stops at every other character outside the
// alphabet (whitespace, a "=" before the end, bytes over 0x7f), which
// yields fewer bytes than the length implies; and it ignores the padding
// bits, which the last quantum's check covers.
function decodeBase64Node(B: typeof import("node:buffer").Buffer, b: Uint8Array): Uint8Array | undefined {
  const n = b.length;
  if (indexOfByte(b, 0x2d) >= 0 || indexOfByte(b, 0x5f) >= 0) return undefined;
  const pad = b[n - 1] === EQ ? (b[n - 2] === EQ ? 2 : 1) : 0;
  const m = (n / 4) * 3 - pad;
  if (pad) {
    const c = B64_VAL[b[n - 3]!]!;
    if (pad === 2 ? c & 0xf : B64_VAL[b[n - 2]!]! & 0x3) return undefined;
  }
  let out: Uint8Array = B.from(B.from(b.buffer, b.byteOffset, n).toString("latin1"), "base64");
  if (out.length !== m) return undefined;
  // A small result is a slice of Buffer's shared pool: copied out.
  if (out.byteOffset !== 0 || out.buffer.byteLength !== m) out = new Uint8Array(out);
  return new Uint8Array(out.buffer, 0, m);
}

function decodeBase64JS(b: Uint8Array): Uint8Array | undefined {
  const n = b.length;
  if (n % 4 !== 0) return undefined;
  if (n === 0) return new Uint8Array(0);
  let pad = 0;
  if (b[n - 1] === EQ) pad = b[n - 2] === EQ ? 2 : 1;
  const out = new Uint8Array((n / 4) * 3 - pad);
  const full = pad ? n - 4 : n;
  let o = 0;
  for (let i = 0; i < full; i += 4) {
    const x = B64_PAIR[(b[i]! << 8) | b[i + 1]!]!;
    const y = B64_PAIR[(b[i + 2]! << 8) | b[i + 3]!]!;
    if ((x | y) < 0) return undefined;
    out[o] = x >> 4;
    out[o + 1] = ((x & 0xf) << 4) | (y >> 8);
    out[o + 2] = y & 0xff;
    o += 3;
  }
  if (pad) {
    const a = B64_VAL[b[n - 4]!]!, c = B64_VAL[b[n - 3]!]!;
    if ((a | c) < 0) return undefined;
    if (pad === 2) {
      if (c & 0xf) return undefined;
      out[o++] = (a << 2) | (c >> 4);
    } else {
      const d = B64_VAL[b[n - 2]!]!;
      if (d < 0 || d & 0x3) return undefined;
      out[o++] = (a << 2) | (c >> 4);
      out[o++] = ((c & 0xf) << 4) | (d >> 2);
    }
  }
  return out;
}

/** Standard padded base64 of b. */
export function encodeBase64(b: Uint8Array): string {
  if (NodeBuffer) return NodeBuffer.from(b.buffer, b.byteOffset, b.byteLength).toString("base64");
  let s = "";
  let i = 0;
  for (; i + 2 < b.length; i += 3) {
    const v = (b[i]! << 16) | (b[i + 1]! << 8) | b[i + 2]!;
    s += B64[v >> 18]! + B64[(v >> 12) & 63]! + B64[(v >> 6) & 63]! + B64[v & 63]!;
  }
  if (i < b.length) {
    const v = (b[i]! << 16) | ((b[i + 1] ?? 0) << 8);
    s += B64[v >> 18]! + B64[(v >> 12) & 63]! + (i + 1 < b.length ? B64[(v >> 6) & 63]! : "=") + "=";
  }
  return s;
}

// ---- the decoder -------------------------------------------------------------

const MAX_DEPTH = 3;

class Decoder {
  s: Uint8Array = new Uint8Array(0);
  i = 0;
  frame = "";
  typeEnd = 0;

  decode(body: Uint8Array): Frame {
    this.s = body;
    this.i = 0;
    this.frame = "";
    if (body.length === 0 || body[0] !== 0x7b) throw this.syntax("a frame starts with '{'");
    const [typ, first] = this.resolveType();
    const s = schemas[typ]!;
    this.frame = s.name;
    const o: Record<string, unknown> = { type: typ };
    this.i = first ? this.typeEnd : 0;
    this.object(s, o, "", first);
    if (this.i !== this.s.length) throw this.fail("", "trailing_data", "after the object at offset " + this.i);
    return o as unknown as Frame;
  }

  resolveType(): [string, boolean] {
    this.i = 1;
    this.ws();
    if (this.peek() === 0x7d) throw new DecodeError("", "type", "missing_field");
    for (let n = 0; ; n++) {
      if (this.peek() !== 0x22) throw this.syntax("expected a key");
      const key = this.readString();
      this.colon();
      if (isType(key)) {
        if (this.peek() !== 0x22) throw this.wrongType("type", "string");
        const v = asText(this.readString());
        if (!Object.hasOwn(schemas, v)) throw new DecodeError("", "type", "unknown_type", JSON.stringify(v));
        this.typeEnd = this.i;
        return [v, n === 0];
      }
      this.skip(2);
      this.ws();
      const c = this.peek();
      if (c === 0x2c) {
        this.i++;
        this.ws();
      } else if (c === 0x7d) {
        throw new DecodeError("", "type", "missing_field");
      } else {
        throw this.syntax("expected ',' or '}'");
      }
    }
  }

  object(s: Schema, o: Record<string, unknown>, parent: string, resume: boolean): void {
    const seen = new Set<string>();
    if (resume) {
      seen.add("type");
    } else {
      this.i++; // '{'
      this.ws();
      if (this.peek() === 0x7d) {
        this.i++;
        this.end(s, o, seen, parent);
        return;
      }
    }
    for (let member = !resume; ; member = true) {
      if (member) {
        if (this.peek() !== 0x22) throw this.syntax("expected a key");
        const kb = this.readString();
        const key = asText(kb);
        const idx = s.index.get(key);
        if (idx === undefined) {
          const kind: Kind = s.fields.some((fd) => asciiEqualFold(fd.name, kb)) ? "case_variant_key" : "unknown_field";
          throw this.fail(join(parent, key), kind, "");
        }
        const fd = s.fields[idx]!;
        if (seen.has(fd.name)) throw this.fail(join(parent, fd.name), "duplicate_key", "");
        const e = onKey(s, seen, fd.name);
        if (e) throw e;
        seen.add(fd.name);
        this.colon();
        if (fd.rule === "type") this.i = this.typeEnd;
        else o[fd.name] = this.value(fd, parent);
      }
      this.ws();
      const c = this.peek();
      if (c === 0x2c) {
        this.i++;
        this.ws();
      } else if (c === 0x7d) {
        this.i++;
        this.end(s, o, seen, parent);
        return;
      } else {
        throw this.syntax("expected ',' or '}'");
      }
    }
  }

  end(s: Schema, o: Record<string, unknown>, seen: Set<string>, parent: string): void {
    const e = atEnd(s, o, seen, parent, this.frame);
    if (e) throw e;
  }

  value(fd: Field, parent: string): unknown {
    const path = join(parent, fd.name);
    const c = this.peek();
    switch (fd.rule) {
      case "int": {
        if (c !== 0x2d && !isDigit(c)) throw this.wrongType(path, "integer");
        const v = this.integer(path);
        if (v < fd.min || v > fd.max) throw this.fail(path, "out_of_bounds", `${v} outside ${fd.min}..${fd.max}`);
        return v;
      }
      case "data": {
        if (c !== 0x22) throw this.wrongType(path, "base64 string");
        return this.dataValue(path);
      }
      case "args":
        if (c !== 0x5b) throw this.wrongType(path, "array");
        return this.arguments(path);
      case "env":
        if (c !== 0x7b) throw this.wrongType(path, "object");
        return this.environment(path);
      case "bool":
        if (c === 0x74) {
          this.literal("true");
          return true;
        }
        if (c === 0x66) {
          this.literal("false");
          return false;
        }
        throw this.wrongType(path, "boolean");
      case "object": {
        if (c !== 0x7b) throw this.wrongType(path, "object");
        const o: Record<string, unknown> = {};
        this.object(fd.sub!, o, path, false);
        return o;
      }
    }
    if (c !== 0x22) throw this.wrongType(path, "string");
    const b = this.readString();
    const k = checkString(fd.rule, b);
    if (k !== "") throw this.fail(path, k, "");
    return asText(b);
  }

  integer(path: string): Int {
    const start = this.i;
    const plain = this.number();
    if (!plain) throw this.fail(path, "bad_integer", "not a non-negative integer");
    const n = this.i - start;
    if (n <= 15) {
      let v = 0;
      for (let j = start; j < this.i; j++) v = v * 10 + (this.s[j]! - 0x30);
      return v;
    }
    if (n > 19) throw this.fail(path, "bad_integer", "overflows int64");
    const v = BigInt(latin1.decode(this.s.subarray(start, this.i)));
    if (v > MAX_INT64) throw this.fail(path, "bad_integer", "overflows int64");
    return v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
  }

  dataValue(path: string): Uint8Array {
    // Fast path: up to the next quote, in one pass that checks and decodes
    // (a backslash or control character is not base64, so such a string
    // takes the exact path below).
    const start = this.i + 1;
    const j = indexOfByte(this.s, 0x22, start);
    if (j >= 0) {
      const quick = decodeBase64(this.s.subarray(start, j));
      if (quick !== undefined && quick.length > 0 && quick.length <= MAX_DATA) {
        this.i = j + 1;
        return quick;
      }
    }
    const b = this.readString();
    if (b.indexOf(0x0d) >= 0 || b.indexOf(0x0a) >= 0) throw this.fail(path, "bad_base64", "");
    const data = decodeBase64(b);
    if (data === undefined) throw this.fail(path, "bad_base64", "");
    if (data.length === 0 || data.length > MAX_DATA) throw this.fail(path, "out_of_bounds", `data of ${data.length} bytes`);
    return data;
  }

  arguments(path: string): string[] {
    this.i++; // '['
    this.ws();
    const args: string[] = [];
    if (this.peek() === 0x5d) {
      this.i++;
      return args;
    }
    for (;;) {
      if (args.length === MAX_ARGUMENTS) throw this.fail(path, "out_of_bounds", `more than ${MAX_ARGUMENTS} arguments`);
      if (this.peek() !== 0x22) throw this.wrongType(path, "string");
      const b = this.readString();
      if (b.indexOf(0) >= 0) throw this.fail(path, "nul_byte", `argument ${args.length}`);
      if (b.length > MAX_ARGUMENT_BYTES) throw this.fail(path, "out_of_bounds", `argument ${args.length}`);
      args.push(asText(b));
      this.ws();
      const c = this.peek();
      if (c === 0x2c) {
        this.i++;
        this.ws();
      } else if (c === 0x5d) {
        this.i++;
        return args;
      } else {
        throw this.syntax("expected ',' or ']'");
      }
    }
  }

  environment(path: string): Record<string, string> {
    this.i++; // '{'
    this.ws();
    const env: Record<string, string> = Object.create(null);
    if (this.peek() === 0x7d) {
      this.i++;
      return env;
    }
    let total = 0;
    let count = 0;
    for (;;) {
      if (count === MAX_ENV_ENTRIES) throw this.fail(path, "out_of_bounds", `more than ${MAX_ENV_ENTRIES} entries`);
      if (this.peek() !== 0x22) throw this.syntax("expected a key");
      const kb = this.readString();
      const k = asText(kb);
      if (Object.hasOwn(env, k)) throw this.fail(path, "duplicate_key", "key " + JSON.stringify(k));
      if (!validEnvKey(kb)) throw this.fail(path, "bad_env_key", "key " + JSON.stringify(k));
      const klen = kb.length;
      this.colon();
      if (this.peek() !== 0x22) throw this.wrongType(path, "string");
      const v = this.readString();
      if (v.indexOf(0) >= 0) throw this.fail(path, "nul_byte", "value of " + JSON.stringify(k));
      total += klen + v.length;
      if (total > MAX_ENV_BYTES) throw this.fail(path, "out_of_bounds", `more than ${MAX_ENV_BYTES} bytes`);
      env[k] = asText(v);
      count++;
      this.ws();
      const c = this.peek();
      if (c === 0x2c) {
        this.i++;
        this.ws();
      } else if (c === 0x7d) {
        this.i++;
        return env;
      } else {
        throw this.syntax("expected ',' or '}'");
      }
    }
  }

  skip(depth: number): void {
    const c = this.peek();
    if (c !== 0x7b && c !== 0x5b) {
      this.scalar();
      return;
    }
    if (depth > MAX_DEPTH) throw this.syntax("nested deeper than " + MAX_DEPTH);
    const closer = c === 0x7b ? 0x7d : 0x5d;
    this.i++;
    this.ws();
    if (this.peek() === closer) {
      this.i++;
      return;
    }
    for (;;) {
      if (c === 0x7b) {
        if (this.peek() !== 0x22) throw this.syntax("expected a key");
        this.readString();
        this.colon();
      }
      this.skip(depth + 1);
      this.ws();
      const d = this.peek();
      if (d === 0x2c) {
        this.i++;
        this.ws();
      } else if (d === closer) {
        this.i++;
        return;
      } else {
        throw this.syntax("expected ',' or a closer");
      }
    }
  }

  scalar(): void {
    const c = this.peek();
    if (c === 0x22) this.readString();
    else if (c === 0x2d || isDigit(c)) this.number();
    else if (c === 0x74) this.literal("true");
    else if (c === 0x66) this.literal("false");
    else if (c === 0x6e) this.literal("null");
    else throw this.syntax("expected a value");
  }

  wrongType(path: string, want: string): DecodeError {
    const c = this.peek();
    if (c !== 0x7b && c !== 0x5b) this.scalar();
    return this.fail(path, "wrong_type", "want " + want);
  }

  literal(lit: string): void {
    for (let j = 0; j < lit.length; j++) {
      if (this.s[this.i + j] !== lit.charCodeAt(j)) throw this.syntax("invalid literal");
    }
    this.i += lit.length;
  }

  // number reads a JSON number and reports whether it is plain: no minus
  // sign, fraction or exponent.
  number(): boolean {
    const s = this.s;
    let i = this.i;
    let plain = true;
    if (s[i] === 0x2d) {
      plain = false;
      i++;
    }
    if (s[i] === 0x30) {
      i++;
    } else if (i < s.length && isDigit(s[i]!)) {
      while (i < s.length && isDigit(s[i]!)) i++;
    } else {
      this.i = i;
      throw this.syntax("invalid number");
    }
    if (s[i] === 0x2e) {
      plain = false;
      i++;
      if (i >= s.length || !isDigit(s[i]!)) {
        this.i = i;
        throw this.syntax("invalid number");
      }
      while (i < s.length && isDigit(s[i]!)) i++;
    }
    if (s[i] === 0x65 || s[i] === 0x45) {
      plain = false;
      i++;
      if (s[i] === 0x2b || s[i] === 0x2d) i++;
      if (i >= s.length || !isDigit(s[i]!)) {
        this.i = i;
        throw this.syntax("invalid number");
      }
      while (i < s.length && isDigit(s[i]!)) i++;
    }
    this.i = i;
    return plain;
  }

  // readString reads the JSON string at this.i and returns its UTF-8 bytes:
  // a view of the line when it has no escapes, a fresh array otherwise.
  readString(): Uint8Array {
    const s = this.s;
    const start = this.i + 1;
    let i = start;
    while (i < s.length) {
      const c = s[i]!;
      if (c === 0x22) {
        this.i = i + 1;
        return s.subarray(start, i);
      }
      if (c === 0x5c || c < 0x20 || c >= 0x80) break;
      i++;
    }
    const buf: number[] = Array.from(s.subarray(start, i));
    for (;;) {
      if (i >= s.length) {
        this.i = i;
        throw this.syntax("unterminated string");
      }
      const c = s[i]!;
      if (c === 0x22) {
        this.i = i + 1;
        return Uint8Array.from(buf);
      } else if (c < 0x20) {
        this.i = i;
        throw this.syntax("control character in string");
      } else if (c < 0x80 && c !== 0x5c) {
        buf.push(c);
        i++;
      } else if (c >= 0x80) {
        const size = runeSize(s, i);
        if (size === 0) {
          this.i = i;
          throw this.syntax("invalid UTF-8");
        }
        for (let j = 0; j < size; j++) buf.push(s[i + j]!);
        i += size;
      } else {
        if (i + 1 >= s.length) {
          this.i = i;
          throw this.syntax("unterminated string");
        }
        const e = s[i + 1]!;
        i += 2;
        switch (e) {
          case 0x22:
          case 0x5c:
          case 0x2f:
            buf.push(e);
            break;
          case 0x62:
            buf.push(8);
            break;
          case 0x66:
            buf.push(12);
            break;
          case 0x6e:
            buf.push(10);
            break;
          case 0x72:
            buf.push(13);
            break;
          case 0x74:
            buf.push(9);
            break;
          case 0x75: {
            let r = hex4(s, i);
            if (r < 0) {
              this.i = i;
              throw this.syntax("invalid \\u escape");
            }
            i += 4;
            if (r >= 0xd800 && r <= 0xdfff) {
              let r2 = -1;
              if (r < 0xdc00 && i + 6 <= s.length && s[i] === 0x5c && s[i + 1] === 0x75) r2 = hex4(s, i + 2);
              if (r2 < 0xdc00 || r2 > 0xdfff) {
                this.i = i;
                throw this.syntax("lone surrogate");
              }
              r = 0x10000 + ((r - 0xd800) << 10) + (r2 - 0xdc00);
              i += 6;
            }
            appendRune(buf, r);
            break;
          }
          default:
            this.i = i - 1;
            throw this.syntax("invalid escape");
        }
      }
    }
  }

  ws(): void {
    const s = this.s;
    while (this.i < s.length) {
      const c = s[this.i];
      if (c !== 0x20 && c !== 0x09 && c !== 0x0d) return;
      this.i++;
    }
  }

  colon(): void {
    this.ws();
    if (this.peek() !== 0x3a) throw this.syntax("expected ':'");
    this.i++;
    this.ws();
  }

  peek(): number {
    return this.i < this.s.length ? this.s[this.i]! : 0;
  }

  fail(field: string, kind: Kind, detail: string): DecodeError {
    return new DecodeError(this.frame, field, kind, detail);
  }

  syntax(msg: string): DecodeError {
    return this.fail("", "syntax", msg + (this.i >= this.s.length ? " at end of line" : " at offset " + this.i));
  }
}

function isType(b: Uint8Array): boolean {
  return b.length === 4 && b[0] === 0x74 && b[1] === 0x79 && b[2] === 0x70 && b[3] === 0x65;
}

function asciiEqualFold(a: string, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    let x = a.charCodeAt(i);
    let y = b[i]!;
    if (x >= 0x41 && x <= 0x5a) x += 0x20;
    if (y >= 0x41 && y <= 0x5a) y += 0x20;
    if (x !== y) return false;
  }
  return true;
}

function hex4(s: Uint8Array, i: number): number {
  if (i + 4 > s.length) return -1;
  let r = 0;
  for (let j = i; j < i + 4; j++) {
    const c = s[j]!;
    let v: number;
    if (isDigit(c)) v = c - 0x30;
    else if (c >= 0x61 && c <= 0x66) v = c - 0x61 + 10;
    else if (c >= 0x41 && c <= 0x46) v = c - 0x41 + 10;
    else return -1;
    r = (r << 4) | v;
  }
  return r;
}

function appendRune(buf: number[], r: number): void {
  if (r < 0x80) buf.push(r);
  else if (r < 0x800) buf.push(0xc0 | (r >> 6), 0x80 | (r & 0x3f));
  else if (r < 0x10000) buf.push(0xe0 | (r >> 12), 0x80 | ((r >> 6) & 0x3f), 0x80 | (r & 0x3f));
  else buf.push(0xf0 | (r >> 18), 0x80 | ((r >> 12) & 0x3f), 0x80 | ((r >> 6) & 0x3f), 0x80 | (r & 0x3f));
}

// runeSize returns the length of the valid UTF-8 sequence at s[i], or 0
// (as Go's utf8.DecodeRune reporting RuneError of size 1).
function runeSize(s: Uint8Array, i: number): number {
  const c = s[i]!;
  const n = s.length;
  const cont = (j: number, lo = 0x80, hi = 0xbf) => j < n && s[j]! >= lo && s[j]! <= hi;
  if (c < 0x80) return 1;
  if (c < 0xc2) return 0;
  if (c < 0xe0) return cont(i + 1) ? 2 : 0;
  if (c < 0xf0) {
    const lo = c === 0xe0 ? 0xa0 : 0x80;
    const hi = c === 0xed ? 0x9f : 0xbf;
    return cont(i + 1, lo, hi) && cont(i + 2) ? 3 : 0;
  }
  if (c < 0xf5) {
    const lo = c === 0xf0 ? 0x90 : 0x80;
    const hi = c === 0xf4 ? 0x8f : 0xbf;
    return cont(i + 1, lo, hi) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  }
  return 0;
}

const decoder = new Decoder();

/**
 * Decodes one frame from line (bytes, or a string taken as its UTF-8),
 * which may end in its '\n'. maxLine is the line limit counting the '\n'
 * (MAX_LINE when 0). A refused line throws a DecodeError.
 */
export function decode(line: Uint8Array | string, maxLine = MAX_LINE): Frame {
  let body = typeof line === "string" ? encoder.encode(line) : line;
  const limit = maxLine > 0 ? maxLine : MAX_LINE;
  if (body.length > 0 && body[body.length - 1] === 0x0a) body = body.subarray(0, body.length - 1);
  if (body.length + 1 > limit) throw new DecodeError("", "", "line_too_long", `over ${limit} bytes`);
  try {
    return decoder.decode(body);
  } finally {
    decoder.s = new Uint8Array(0); // do not hold on to the caller's line
  }
}

// ---- the encoder -------------------------------------------------------------

function present(s: Schema, o: Record<string, unknown>, fd: Field): boolean {
  if (fd.rule === "type") return true;
  if (s.frame && s.name === "exit" && fd.name === "code") {
    return o.signal === undefined || o.signal === "" || (o.code !== undefined && o.code !== 0 && o.code !== 0n);
  }
  if (fd.req) return true;
  const v = o[fd.name];
  return v !== undefined && v !== null && v !== 0 && v !== 0n && v !== "" && v !== false;
}

function encodeObject(s: Schema, o: Record<string, unknown>): string {
  let out = "{";
  let sep = false;
  for (const fd of s.fields) {
    if (!present(s, o, fd)) continue;
    if (sep) out += ",";
    sep = true;
    out += '"' + fd.name + '":';
    out += fd.rule === "type" ? JSON.stringify(s.name) : encodeValue(fd, o[fd.name]);
  }
  return out + "}";
}

function encodeValue(fd: Field, v: unknown): string {
  switch (fd.rule) {
    case "int":
      return String(v ?? 0);
    case "data":
      return '"' + encodeBase64(v as Uint8Array) + '"';
    case "args":
      return "[" + (v as string[]).map((a) => JSON.stringify(a)).join(",") + "]";
    case "env": {
      const env = v as Record<string, string>;
      return "{" + Object.keys(env).sort(byteOrder).map((k) => JSON.stringify(k) + ":" + JSON.stringify(env[k])).join(",") + "}";
    }
    case "bool":
      return v ? "true" : "false";
    case "object":
      return encodeObject(fd.sub!, v as Record<string, unknown>);
  }
  // JSON.stringify escapes exactly as canonical form asks: \" \\ \b \f \n \r
  // \t, other control characters as \u00xx in lowercase, nothing else.
  return JSON.stringify(v ?? "");
}

function byteOrder(a: string, b: string): number {
  const x = encoder.encode(a);
  const y = encoder.encode(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
  return x.length - y.length;
}

/**
 * Encodes f in canonical form, '\n' included. It does not validate: see
 * validate for frames built by hand.
 */
export function encode(f: Frame): string {
  const s = schemas[f.type];
  if (!s) throw new TypeError("procwire: encode of an unknown frame type " + String(f.type));
  if (f.type === "stdin" || f.type === "stdout" || f.type === "stderr") {
    const enc = f.enc !== undefined && f.enc !== "" ? `,"enc":${JSON.stringify(f.enc)}` : "";
    return `{"type":"${f.type}","off":${f.off},"data":"${encodeBase64(f.data)}"${enc}}\n`;
  }
  return encodeObject(s, f as unknown as Record<string, unknown>) + "\n";
}

// ---- validate ----------------------------------------------------------------

/**
 * Checks a frame built by hand against every rule the decoder applies, and
 * returns the first broken one as a DecodeError, or undefined.
 */
export function validate(f: Frame): DecodeError | undefined {
  const s = schemas[f.type];
  if (!s) return new DecodeError("", "type", "unknown_type", "not a frame");
  const e = validateObject(s, f as unknown as Record<string, unknown>, "");
  if (e) return new DecodeError(s.name, e.field, e.kind, e.detail);
  return undefined;
}

function validateObject(s: Schema, o: Record<string, unknown>, parent: string): DecodeError | undefined {
  if (o === null || typeof o !== "object") return new DecodeError("", parent, "wrong_type", "want object");
  const seen = new Set<string>();
  for (const fd of s.fields) {
    if (fd.rule === "type") {
      seen.add("type");
      continue;
    }
    if (!present(s, o, fd)) continue;
    const e = onKey(s, seen, fd.name) ?? validateValue(fd, o[fd.name], parent);
    if (e) return e;
    seen.add(fd.name);
  }
  return atEnd(s, o, seen, parent, "");
}

function validateValue(fd: Field, v: unknown, parent: string): DecodeError | undefined {
  const path = join(parent, fd.name);
  const fail = (k: Kind, d = "") => new DecodeError("", path, k, d);
  const text = (x: unknown): Uint8Array | DecodeError => {
    if (typeof x !== "string") return fail("wrong_type", "want string");
    if (!x.isWellFormed()) return new DecodeError("", "", "syntax", "lone surrogate in " + path);
    return encoder.encode(x);
  };
  switch (fd.rule) {
    case "int": {
      if (typeof v === "number" && !Number.isSafeInteger(v)) return fail("bad_integer", "not a safe integer");
      if (typeof v !== "number" && typeof v !== "bigint") return fail("wrong_type", "want integer");
      if (v < 0) return fail("bad_integer", "negative");
      if (v < fd.min || v > fd.max) return fail("out_of_bounds", `${v} outside ${fd.min}..${fd.max}`);
      return undefined;
    }
    case "data":
      if (!(v instanceof Uint8Array)) return fail("wrong_type", "want Uint8Array");
      if (v.length === 0 || v.length > MAX_DATA) return fail("out_of_bounds", `data of ${v.length} bytes`);
      return undefined;
    case "args": {
      if (!Array.isArray(v)) return fail("wrong_type", "want array");
      for (let i = 0; i < v.length; i++) {
        if (i === MAX_ARGUMENTS) return fail("out_of_bounds", `more than ${MAX_ARGUMENTS} arguments`);
        const b = text(v[i]);
        if (b instanceof DecodeError) return b;
        if (b.indexOf(0) >= 0) return fail("nul_byte", `argument ${i}`);
        if (b.length > MAX_ARGUMENT_BYTES) return fail("out_of_bounds", `argument ${i}`);
      }
      return undefined;
    }
    case "env": {
      if (v === null || typeof v !== "object" || Array.isArray(v)) return fail("wrong_type", "want object");
      const env = v as Record<string, unknown>;
      let total = 0;
      const keys = Object.keys(env).sort(byteOrder);
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i]!;
        if (i === MAX_ENV_ENTRIES) return fail("out_of_bounds", `more than ${MAX_ENV_ENTRIES} entries`);
        const kb = text(k);
        if (kb instanceof DecodeError) return kb;
        if (!validEnvKey(kb)) return fail("bad_env_key", "key " + JSON.stringify(k));
        const vb = text(env[k]);
        if (vb instanceof DecodeError) return vb;
        if (vb.indexOf(0) >= 0) return fail("nul_byte", "value of " + JSON.stringify(k));
        total += kb.length + vb.length;
        if (total > MAX_ENV_BYTES) return fail("out_of_bounds", `more than ${MAX_ENV_BYTES} bytes`);
      }
      return undefined;
    }
    case "bool":
      return typeof v === "boolean" ? undefined : fail("wrong_type", "want boolean");
    case "object":
      return validateObject(fd.sub!, v as Record<string, unknown>, path);
  }
  const b = text(v);
  if (b instanceof DecodeError) return b;
  const k = checkString(fd.rule, b);
  return k === "" ? undefined : fail(k);
}

// ---- evidence ------------------------------------------------------------------

/**
 * The evidence digest of a request's arguments (PROTOCOL.md §6): "sha256:"
 * and the hex SHA-256 of the argument count as 4 bytes big-endian, then per
 * argument its length as 4 bytes big-endian and its bytes.
 */
export async function argumentsDigest(args: readonly string[]): Promise<string> {
  const parts = args.map((a) => encoder.encode(a));
  const total = 4 + parts.reduce((n, p) => n + 4 + p.length, 0);
  const buf = new Uint8Array(total);
  const view = new DataView(buf.buffer);
  view.setUint32(0, args.length);
  let o = 4;
  for (const p of parts) {
    view.setUint32(o, p.length);
    buf.set(p, o + 4);
    o += 4 + p.length;
  }
  const sum = new Uint8Array(await globalThis.crypto.subtle.digest("SHA-256", buf));
  return "sha256:" + Array.from(sum, (x) => x.toString(16).padStart(2, "0")).join("");
}
