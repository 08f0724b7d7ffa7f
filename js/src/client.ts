// openProcess: one remote process's stdio as Web Streams, with
// reconnection, resume, credit and acknowledgement hidden from the caller.
// The behaviour follows the Go client (client/): the same limits, the same
// evidence checks, the same ends of a handle.

import {
  CLIENT_FRAMES,
  CLOSE_GOING_AWAY,
  CLOSE_INVALID_FRAME,
  CLOSE_MESSAGE_TOO_BIG,
  CLOSE_POLICY_VIOLATION,
  CLOSE_PROTOCOL_ERROR,
  CLOSE_RESUMED_ELSEWHERE,
  DecodeError,
  EVIDENCE_FIELDS,
  MAX_DATA,
  MAX_LINE,
  MAX_WINDOW,
  MIN_WINDOW,
  SIGNALS,
  WIRE_REVISION,
  argumentsDigest,
  decode,
  encode,
  inflateS2,
  validate,
  type Evidence,
  type ExitFrame,
  type Frame,
  type Int,
  type Limits,
  type OpenFrame,
  type OpenedFrame,
  type ProcessRequest,
  type ResumeFrame,
  type ResumedFrame,
} from "./frames.js";
import { SandboxError, SandboxOperationFailed, contractError, sandboxError } from "./errors.js";
import { Failure, protocolError, surface } from "./failure.js";
import { bearerSubprotocol, dial, isLoopback, isWsClass, takeEarly, webSocketClass, type CloseInfo, type FirstOffer, type Transport, type WebSocketClass } from "./transport.js";

/** Options of openProcess. Every field is optional. */
export interface OpenOptions {
  /**
   * Bearer token. Sent in the upgrade's Authorization header, or, where the
   * WebSocket class cannot send headers (a WHATWG one) or with tokenVia
   * "subprotocol", as the subprotocol `procwire.bearer.<base64url>`
   * offered besides procwire.v1 (PROTOCOL.md §1). Never over ws:// to a
   * host other than loopback, unless allowInsecureToken.
   */
  token?: string;
  /** How the token travels: "header" (the default with `ws`) or "subprotocol" (the default, and the only way, with a WHATWG WebSocket). */
  tokenVia?: "header" | "subprotocol";
  /** Allows sending the token over plain ws:// to a host that is not loopback (default false: a TypeError). */
  allowInsecureToken?: boolean;
  /** More HTTP headers for every upgrade (ws only). */
  headers?: Record<string, string>;
  /**
   * Sends every connection's first frame (the open, with its environment;
   * a resume, with its token) as a message after the upgrade instead of in
   * its Sec-WebSocket-Protocol header (PROTOCOL.md §1, "The first frame in
   * the upgrade"): for a proxy on the way that logs request headers or caps
   * them below the 4 KiB the frame may take. One round trip more per
   * connection. Default false: a hop that refuses the upgrade for its size
   * (431, or nginx's 400) then costs one refused request, after which the
   * process's first frames go as messages.
   */
  firstFrameAsMessage?: boolean;
  /** The WebSocket class: default `ws` on Node, globalThis.WebSocket elsewhere. */
  WebSocket?: WebSocketClass;
  /** Requested stdout window in bytes (1,024 ..= 1,073,741,824); default the server's. */
  stdoutWindow?: number;
  /** Requested stdin window in bytes, same range; default the server's. */
  stdinWindow?: number;
  /** Most stderr bytes held unread; default the server's stderr_window. */
  stderrBuffer?: number;
  /** First reconnection delay in ms (default 50); it doubles up to reconnectMax. */
  reconnectMin?: number;
  /** Longest reconnection delay in ms (default 2,000). */
  reconnectMax?: number;
  /** Bound on opening (dial and answer) in ms (default 30,000). */
  openTimeout?: number;
  /** Bound on each destroy() attempt, and on the destroy the client makes itself after a failure, in ms (default 10,000). */
  destroyTimeout?: number;
  /** Bound on signal() waiting for the server's answer, in ms (default 10,000); past it, SandboxOperationFailed{signal_process, timed_out}. */
  signalTimeout?: number;
  /**
   * How many resumes (or repeated opens) in a row may reach the server and
   * fail without an answer before the handle ends with ConnectionLost
   * (default 8). Dials that reach no server count only against the grace.
   */
  resumeBudget?: number;
  /**
   * Asks the server to compress stdout and stderr payloads with s2
   * (PROTOCOL.md §5, "Compression"); the client inflates them, bounded by
   * max_data, and every count (offsets, acks, windows, progress) stays in
   * raw bytes. stdin is always sent uncompressed. A server configured
   * without compression answers as usual; one that predates it refuses the
   * open with 1007 `open.output_enc: unknown_field`. Default false.
   */
  compress?: boolean;
  /**
   * Asks for limits on the process's whole tree tighter than (or as tight
   * as) the server's: pids (tasks), memory (bytes), cpu_millicores. One
   * above the server's, or one it does not enforce, is refused with
   * SandboxCapabilityUnavailable{requirement: "resources"} before anything
   * starts. With it, even {}, the handle's evidence.limits says the limits
   * in force. A server that predates limits refuses the open with 1007
   * `open.limits: unknown_field`.
   */
  limits?: Limits;
  /**
   * Aborts the open, at any moment: openProcess rejects with
   * signal.reason, after destroying (by its open key) a process the
   * server may have started for it. It does not bind the handle once
   * openProcess resolved.
   */
  signal?: AbortSignal;
  /**
   * Runs the process on a new pseudo-terminal of this size (PROTOCOL.md,
   * open.tty): output is everything the terminal writes (stdout and stderr
   * merged, "\r\n" line ends), input is keystrokes, `error` stays empty,
   * and resize() follows the size. A server without terminals refuses the
   * open with SandboxCapabilityUnavailable (requirement "tty").
   */
  tty?: TtyOptions;
}

/** The terminal of OpenOptions.tty. */
export interface TtyOptions {
  /** Rows and columns, 1..65535. */
  rows: number;
  cols: number;
  /** TERM of the process, unless its request's environment sets TERM. */
  term?: string;
  /** The size in pixels, 0..65535, if known. */
  xpixel?: number;
  ypixel?: number;
}

/** Options of a handle's wait(), signal() and destroy(). */
export interface CallOptions {
  /** Ends this caller's wait with signal.reason; see each method for what goes on. */
  signal?: AbortSignal;
}

/**
 * The chunks of output and error: bytes backed by a plain ArrayBuffer (not
 * a SharedArrayBuffer), so they type-check into TextDecoderStream and other
 * BufferSource sinks.
 */
export type Bytes = Uint8Array<ArrayBuffer>;

/** How the process ended: exactly one of code and signal is set. */
export type Exit =
  | { readonly code: number; readonly signal?: undefined }
  /** reason "oom": the kernel's OOM killer ended the process (PROTOCOL.md §exit). */
  | { readonly code?: undefined; readonly signal: string; readonly reason?: string };

/** A signal a client may send. */
export type SignalName = "SIGINT" | "SIGTERM" | "SIGKILL";

/** Byte counts of a handle, for diagnostics and tests. */
export interface Progress {
  /** stdout bytes received from the server. */
  stdoutReceived: number;
  /** stdout bytes handed to the reader of `output`. */
  stdoutRead: number;
  /** stderr offset after the last byte received. */
  stderrReceived: number;
  /** stdin bytes accepted from `input`. */
  stdinWritten: number;
  /** stdin bytes the server confirmed (credit.stdin_received). */
  stdinReceived: number;
  /** Connections attached so far (1 + resumes). */
  connections: number;
  /** stdout and stderr frames that arrived compressed (enc "s2") and were inflated. */
  framesInflated: number;
}

/** The contract's openProcess handle. */
export interface ProcessHandle {
  /** The server's process id. */
  readonly processId: string;
  /** The server-authored evidence, checked against the request at open and on every resume. */
  readonly evidence: Readonly<Evidence>;
  /** The child's stdin: close() is the half-close, abort() destroys. */
  readonly input: WritableStream<Uint8Array>;
  /** The child's stdout: lossless, with a real EOF; reading it is what lets the child write more. */
  readonly output: ReadableStream<Bytes>;
  /** The child's stderr: bounded, best effort; ends after the exit. */
  readonly error: ReadableStream<Bytes>;
  /**
   * Settles once with the exit; without a signal, the same promise (and
   * object) every time. It rejects with the error that ended the handle
   * (see README, "Errors"); with options.signal, this caller's wait ends
   * with signal.reason, nothing else.
   */
  wait(options?: CallOptions): Promise<Exit>;
  /**
   * Sends a signal to the child's process group: true if delivered, false
   * if it had exited. Bounded by signalTimeout (10 s): past it,
   * SandboxOperationFailed{signal_process, timed_out}. An aborted
   * options.signal rejects with its reason; a signal already sent may
   * still be delivered.
   */
  signal(name: SignalName, options?: CallOptions): Promise<boolean>;
  /**
   * Destroys the process. Each attempt is bounded by destroyTimeout;
   * concurrent calls share the running attempt (the same promise). One
   * that timed out or failed (a SandboxOperationFailed with operation
   * destroy_process: timed_out, or the server's processes_survived,
   * destroy_timeout, destroy_failed) settles nothing, and the next call
   * starts a fresh attempt. Once the server said `destroyed`, every call
   * resolves. An aborted options.signal ends this caller's wait with its
   * reason; the attempt goes on, within its bound.
   */
  destroy(options?: CallOptions): Promise<void>;
  /** stderr bytes dropped by the server's ring or the local bound. */
  errorDropped(): number;
  /** Byte counts so far. */
  progress(): Progress;
  /** Whether the process runs on a terminal (opened with OpenOptions.tty). */
  readonly tty: boolean;
  /**
   * Sets the terminal's size (rows and cols 1..65535); the kernel sends
   * SIGWINCH to its foreground job. Not answered: the last size wins, and
   * it is sent again after a resume. A RangeError for a bad size, a
   * TypeError on a process without a terminal; nothing once the handle
   * has ended.
   */
  resize(rows: number, cols: number): void;
}

const DEFAULT_RECONNECT_MIN = 50;
const DEFAULT_RECONNECT_MAX = 2000;
const DEFAULT_OPEN_TIMEOUT = 30_000;
const DEFAULT_DESTROY_TIMEOUT = 10_000;
const DEFAULT_SIGNAL_TIMEOUT = 10_000;
const AUTO_DESTROY_TIMEOUT = 10_000;
const DEFAULT_RESUME_BUDGET = 8;
const DEFAULT_STDERR_CAP = 4 << 20;
const DEFAULT_STDOUT_CAP = 64 << 20; // the server's default MaxStdoutWindow
const DEFAULT_STDIN_CAP = 16 << 20; // the server's default MaxStdinWindow
const STDIN_CHUNK = 64 * 1024;

/**
 * Opens a process on a procwire server and returns its handle once the
 * server answered `opened` and its evidence matched the request.
 */
export async function openProcess(url: string, instanceId: string, request: ProcessRequest, options: OpenOptions = {}): Promise<ProcessHandle> {
  for (const [name, v] of [["stdoutWindow", options.stdoutWindow], ["stdinWindow", options.stdinWindow]] as const) {
    if (v !== undefined && (!Number.isInteger(v) || v < MIN_WINDOW || v > MAX_WINDOW)) {
      throw new RangeError(`procwire: options.${name} ${v} outside ${MIN_WINDOW}..${MAX_WINDOW}`);
    }
  }
  const rmin = options.reconnectMin ?? DEFAULT_RECONNECT_MIN;
  const rmax = options.reconnectMax ?? Math.max(DEFAULT_RECONNECT_MAX, rmin);
  if (rmin < 0 || rmax < rmin || (options.stderrBuffer ?? 0) < 0) throw new RangeError("procwire: bad reconnect or stderr options");
  const open: OpenFrame = {
    type: "open",
    instance_id: instanceId,
    request: {
      executable: request.executable,
      arguments: [...request.arguments],
      working_directory: request.working_directory,
      environment: { ...request.environment },
    },
    stdout_window: options.stdoutWindow,
    stdin_window: options.stdinWindow,
    output_enc: options.compress ? "s2" : undefined,
    tty: options.tty ? { ...options.tty } : undefined,
    // The exit reasons this client understands: an OOM kill resolves
    // wait() with { signal: "SIGKILL", reason: "oom" }.
    exit_reasons: "oom",
    limits: options.limits !== undefined ? { ...options.limits } : undefined,
  };
  const bad = validate(open);
  if (bad) throw new TypeError(`procwire: bad request: ${bad.message}`, { cause: bad });
  if (options.token !== undefined && !options.allowInsecureToken) {
    const u = new URL(url);
    if (u.protocol !== "wss:" && u.protocol !== "https:" && !isLoopback(u.hostname)) {
      throw new TypeError(`procwire: refusing to send the token over ${u.protocol}// to ${u.hostname}, which is not loopback: use wss://, or set allowInsecureToken`);
    }
  }
  const signal = options.signal;
  signal?.throwIfAborted();
  const C = await webSocketClass(options.WebSocket);
  const digest = await argumentsDigest(open.request.arguments);
  signal?.throwIfAborted();
  const p = new Proc(url, open, options, C, rmin, rmax, digest);
  await p.open();
  if (signal?.aborted) {
    // Aborted after the answer: the process is destroyed, not handed out.
    await p.destroy().catch(() => {});
    throw signal.reason;
  }
  return p.handle();
}

// ByteQueue holds bytes in order, from the absolute offset start.
class ByteQueue {
  private chunks: Uint8Array[] = [];
  private head = 0; // bytes of chunks[0] already taken
  private size = 0;
  private tail: Uint8Array | undefined; // backing store of the last chunk while it can grow
  private tailUsed = 0;
  start = 0;

  get length(): number {
    return this.size;
  }
  end(): number {
    return this.start + this.size;
  }
  push(b: Uint8Array): void {
    if (b.length === 0) return;
    this.tail = undefined;
    this.chunks.push(b);
    this.size += b.length;
  }
  // pushCopy copies b, coalescing small writes into one buffer.
  pushCopy(b: Uint8Array): void {
    const last = this.chunks.length - 1;
    if (this.tail && last >= 0 && this.tailUsed + b.length <= this.tail.length) {
      const from = this.chunks[last]!.byteOffset - this.tail.byteOffset;
      this.tail.set(b, this.tailUsed);
      this.tailUsed += b.length;
      this.chunks[last] = this.tail.subarray(from, this.tailUsed);
      this.size += b.length;
      return;
    }
    if (b.length < STDIN_CHUNK / 4) {
      const tail = new Uint8Array(STDIN_CHUNK);
      tail.set(b);
      this.push(tail.subarray(0, b.length));
      this.tail = tail;
      this.tailUsed = b.length;
      return;
    }
    this.push(b.slice());
  }
  private shift(): void {
    this.chunks.shift();
    this.head = 0;
    if (this.chunks.length === 0) this.tail = undefined;
  }
  // take removes and returns up to max bytes from the front.
  take(max: number): Uint8Array {
    const c = this.chunks[0]!;
    const n = Math.min(max, c.length - this.head);
    const out = c.subarray(this.head, this.head + n);
    this.head += n;
    if (this.head === c.length) this.shift();
    this.size -= n;
    this.start += n;
    return out;
  }
  // from returns up to max bytes at offset off, within one chunk.
  from(off: number, max: number): Uint8Array {
    let skip = off - this.start + this.head;
    for (const c of this.chunks) {
      if (skip < c.length) return c.subarray(skip, Math.min(c.length, skip + max));
      skip -= c.length;
    }
    return new Uint8Array(0);
  }
  discard(off: number): void {
    let n = off - this.start;
    while (n > 0) {
      const c = this.chunks[0]!;
      const k = Math.min(n, c.length - this.head);
      this.head += k;
      this.size -= k;
      this.start += k;
      n -= k;
      if (this.head === c.length) this.shift();
    }
  }
}

// Conn is one attached connection and what was sent on it.
class Conn {
  stdinSent = 0;
  closeSent = false;
  ackSent = 0;
  sigSent = 0;
  resizeSent = 0; // the seq of the last size sent on this connection
  destroySent = false;
  closed = false;
  pingOut = false;
  pings = false; // application-level pings were granted on this connection
  pingID = 0;
  rx = 0; // frames received
  timer: ReturnType<typeof setInterval> | undefined;
  flushing = false;
  constructor(readonly t: Transport) {}
}

interface PendingSignal {
  id: number;
  sig: string;
  resolve: (delivered: boolean) => void;
  reject: (e: Error) => void;
}

class Stop extends Error {}

// The handle's diagnostic property counting wake-ups by channel.
const WAKEUPS = Symbol.for("procwire.wakeups");

// What a waiter waits for.
type Channel = "out" | "err" | "in" | "state";

// DestroyAttempt is one run of destroy(): failed holds the server's answer
// when it could not end the process.
interface DestroyAttempt {
  failed?: SandboxError;
  ctl: AbortController; // aborted when the attempt times out
  promise: Promise<void>;
}

// retryableDestroy reports whether e answers a destroy that freed nothing
// and may be tried again (PROTOCOL.md §4.5): something of the process
// outlived the server's destroy, or its teardown failed.
function retryableDestroy(e: unknown): e is SandboxOperationFailed {
  return e instanceof SandboxOperationFailed && e.operation === "destroy_process";
}

// num turns a wire integer into a number, refusing one past 2^53.
function num(v: Int, field: string): number {
  if (typeof v === "bigint") throw protocolError(field, `${v} is beyond what this client counts`);
  return v;
}

function randomHex(n: number): string {
  const b = new Uint8Array(n);
  globalThis.crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

function jitter(cur: number): number {
  return cur / 2 + Math.random() * (cur / 2);
}

// sleep resolves after ms, or at once when signal aborts.
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}

// raceSignal settles as p does, or rejects with signal.reason when it
// aborts first.
function raceSignal<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}

class Proc {
  id = "";
  token = "";
  evidence!: Evidence;
  grace = 0;
  heartbeat = 0;
  maxData = MAX_DATA;
  stdinWindow = 0;
  errCap = 0;
  outEnc: string | undefined; // the encoding opened chose for stdout and stderr
  inflated = 0;

  conn: Conn | null = null;
  connections = 0;

  // stdout
  outWindow = 0;
  outReceived = 0;
  outConsumed = 0;
  outLimit = 0;
  outQ = new ByteQueue();
  outEOF: number | undefined;
  outCancelled = false;
  ackTo = 0;

  // stderr
  errQ = new ByteQueue();
  errRecv = 0;
  errDropped = 0;

  // stdin
  inBuf = new ByteQueue(); // from the server's stdin_received to what was written
  inSent = 0;
  inClosed = false;
  closeSent = false;
  inErr: Error | undefined; // the server could not write stdin
  stdinLimit = 0;

  exit: Exit | undefined;
  exitPromise: Promise<Exit>;
  private exitResolve!: (e: Exit) => void;
  private exitReject!: (e: Error) => void;
  nextSig = 0;
  signals: PendingSignal[] = [];

  destroyReq = false; // a destroy was asked and did not fail retryably
  attempt: DestroyAttempt | undefined; // the destroy() running
  abandoned = false;
  expired = false; // the grace ran out with no connection: the server expires the process
  destroyed = false; // a destroy settled, with destroyErr
  destroyErr: Error | undefined;
  settledDestroy: Promise<void> | undefined; // what every destroy() returns once settled
  remoteDestroy: Promise<void> | undefined;
  remoteSignal: AbortSignal | undefined; // the signal remoteDestroy runs under
  err: Error | undefined; // why the handle ended; set once
  // The reconnection running, if any: a token, so that a reconnection
  // started from within another (a connection attached and lost in the
  // same turn) is not marked finished by the outer one's end.
  supervisor: object | undefined;
  reached = false; // the last resume's dial reached the server
  pingsAsked = false; // the transport cannot ping: open and resume ask for application-level pings
  firstRefused = false; // a hop refused an upgrade carrying the first frame: first frames go as messages
  isTty = false; // opened on a terminal
  winSize: { rows: number; cols: number; seq: number } | undefined; // the last resize(), sent on every connection

  // Waiters by what they wait for, so that a change wakes only those it
  // concerns: stdout for the output reader, stderr for the error reader,
  // stdin credit for the input writer, and the handle's state for all.
  private waiters: Record<Channel, (() => void)[]> = { out: [], err: [], in: [], state: [] };
  readonly wakeups: Record<Channel, number> = { out: 0, err: 0, in: 0, state: 0 };
  private redial: (() => void) | undefined;
  private inputSignal: AbortSignal | undefined; // the input stream's controller.signal

  readonly input: WritableStream<Uint8Array>;
  readonly output: ReadableStream<Bytes>;
  readonly error: ReadableStream<Bytes>;

  get supervising(): boolean {
    return this.supervisor !== undefined;
  }

  constructor(
    readonly url: string,
    readonly openFrame: OpenFrame,
    readonly opts: OpenOptions,
    readonly C: WebSocketClass,
    readonly rmin: number,
    readonly rmax: number,
    readonly digest: string,
  ) {
    this.exitPromise = new Promise<Exit>((res, rej) => {
      this.exitResolve = res;
      this.exitReject = rej;
    });
    this.exitPromise.catch(() => {}); // a handle nobody waits on must not crash the program
    this.pingsAsked = !isWsClass(C);
    this.input = new WritableStream<Uint8Array>(
      {
        start: (c) => {
          // Aborted at once by writer.abort() or an aborted pipeTo, while
          // the sink's abort() waits for the pending write: the write
          // watches it, so an abort is never stuck behind credit.
          this.inputSignal = c.signal;
        },
        write: (chunk) => this.writeInput(chunk),
        close: () => this.closeInput(),
        abort: () => this.destroy(),
      },
      new ByteLengthQueuingStrategy({ highWaterMark: STDIN_CHUNK }),
    );
    // Byte streams: a BYOB reader gets the bytes copied into its view
    // (never more than it holds is consumed), a default reader gets the
    // decoded frames themselves, transferred. highWaterMark 0: nothing is
    // consumed (and acknowledged) before a reader asks.
    this.output = new ReadableStream(
      { type: "bytes", pull: (c) => this.pullOutput(c), cancel: () => this.cancelOutput() },
      { highWaterMark: 0 },
    );
    this.error = new ReadableStream({ type: "bytes", pull: (c) => this.pullError(c) }, { highWaterMark: 0 });
  }

  handle(): ProcessHandle {
    const h: ProcessHandle = {
      processId: this.id,
      evidence: Object.freeze(
        this.evidence.limits !== undefined
          ? { ...this.evidence, limits: Object.freeze({ ...this.evidence.limits }) }
          : { ...this.evidence },
      ),
      input: this.input,
      output: this.output,
      error: this.error,
      wait: (o) => this.wait(o),
      signal: (name, o) => this.signal(name, o),
      destroy: (o) => this.destroy(o),
      errorDropped: () => this.errDropped,
      tty: this.isTty,
      resize: (rows, cols) => this.resize(rows, cols),
      progress: () => ({
        stdoutReceived: this.outReceived,
        stdoutRead: this.outConsumed,
        stderrReceived: this.errRecv,
        stdinWritten: this.inBuf.end(),
        stdinReceived: this.inBuf.start,
        connections: this.connections,
        framesInflated: this.inflated,
      }),
    };
    // For tests and diagnostics: how many waiters each kind of change woke
    // (out: stdout, err: stderr, in: stdin credit, state: the handle's).
    Object.defineProperty(h, WAKEUPS, { value: () => ({ ...this.wakeups }) });
    return h;
  }

  // ---- notification ----------------------------------------------------------

  // changed resolves at the next change of ch (or of the handle's state),
  // or rejects with signal's reason when it aborts first.
  private changed(ch: Channel, signal?: AbortSignal): Promise<void> {
    if (!signal) return new Promise((res) => this.waiters[ch].push(res));
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise((res, rej) => {
      const onAbort = () => {
        const i = this.waiters[ch].indexOf(wake);
        if (i >= 0) this.waiters[ch].splice(i, 1);
        rej(signal.reason);
      };
      const wake = () => {
        signal.removeEventListener("abort", onAbort);
        res();
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.waiters[ch].push(wake);
    });
  }

  // wake wakes the waiters of ch.
  private wake(ch: Channel): void {
    const w = this.waiters[ch];
    if (w.length === 0) return;
    this.waiters[ch] = [];
    this.wakeups[ch] += w.length;
    for (const f of w) f();
  }

  // broadcast wakes every waiter: the handle's state changed.
  private broadcast(): void {
    this.wake("out");
    this.wake("err");
    this.wake("in");
    this.wake("state");
  }

  // ---- dialing ---------------------------------------------------------------

  // tokenInSubprotocol: a WHATWG WebSocket cannot send the header.
  private tokenInSubprotocol(): boolean {
    return !isWsClass(this.C) || this.opts.tokenVia === "subprotocol";
  }

  private headers(byProcess: boolean): Record<string, string> {
    const h: Record<string, string> = { ...(this.opts.headers ?? {}) };
    if (this.opts.token && !this.tokenInSubprotocol()) h["Authorization"] = "Bearer " + this.opts.token;
    if (isWsClass(this.C)) {
      h["Procwire-Instance"] = this.openFrame.instance_id;
      if (byProcess && this.id) h["Procwire-Process"] = this.id;
    }
    return h;
  }

  // dial connects; first, when given, is offered in the upgrade
  // (PROTOCOL.md §1) unless opts.firstFrameAsMessage, and exchange then
  // sends it only if the server did not take it.
  // Once a hop refused an upgrade carrying the first frame (FirstOffer.refused),
  // every later first frame goes as a message, as with firstFrameAsMessage.
  private async dial(byProcess: boolean, timeout: number, signal?: AbortSignal, first?: FirstOffer): Promise<Transport> {
    const extra = this.opts.token && this.tokenInSubprotocol() ? [bearerSubprotocol(this.opts.token)] : [];
    const offer = this.opts.firstFrameAsMessage || this.firstRefused ? undefined : first;
    try {
      return await dial(this.C, this.url, this.headers(byProcess), extra, timeout, signal, offer);
    } finally {
      if (offer?.refused) this.firstRefused = true;
    }
  }

  // exchange sends a first frame and returns the first answer, or throws.
  private exchange(t: Transport, first: Frame, timeout: number, signal?: AbortSignal): Promise<Frame> {
    return new Promise<Frame>((resolve, reject) => {
      const timer = setTimeout(() => {
        t.terminate();
        reject(new Failure("timed_out", `no answer to ${first.type} within ${timeout} ms`));
      }, timeout);
      const onAbort = () => {
        t.terminate();
        reject(signal!.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      t.onMessage = (line) => {
        done();
        hold(t);
        try {
          const f = this.decodeFrame(line);
          if (f.type === "error") reject(sandboxError(f));
          else resolve(f);
        } catch (e) {
          reject(e);
        }
      };
      t.onClose = (info) => {
        done();
        reject(closeError(info));
      };
      if (t.firstSent) t.firstSent = false; // the server took it from the upgrade
      else t.send(encode(first));
      takeEarly(t); // its answer may have come already
    });
  }

  private decodeFrame(line: Uint8Array): Frame {
    let f: Frame;
    try {
      f = decode(line, MAX_LINE);
    } catch (e) {
      if (e instanceof DecodeError) throw protocolError("", e.message, e);
      throw e;
    }
    if (CLIENT_FRAMES.has(f.type)) throw protocolError(f.type, "a client frame from the server");
    return f;
  }

  // ---- open ------------------------------------------------------------------

  // open is idempotent: it carries a random open key, and an exchange cut
  // before the answer is repeated with the same key, which the server
  // answers with the process it started, never a second one. An open that
  // fails after it may have started the process destroys it by the key.
  async open(): Promise<void> {
    const timeout = this.opts.openTimeout ?? DEFAULT_OPEN_TIMEOUT;
    const deadline = Date.now() + timeout;
    const left = () => Math.max(1, deadline - Date.now());
    const signal = this.opts.signal;
    this.openFrame.open_key = randomHex(32);
    if (this.pingsAsked) this.openFrame.pings = true;
    let sent = false; // an open may have reached the server
    let failed = 0;
    let cur = 0;
    for (;;) {
      let err: unknown;
      let t: Transport | undefined;
      // The open goes in the upgrade with ws, whose failures tell whether
      // the request was sent; a browser's do not, and a browser sends it
      // as a message, so that a wrong address fails at once.
      const offer: FirstOffer | undefined = isWsClass(this.C) ? { line: encode(this.openFrame) } : undefined;
      try {
        t = await this.dial(false, left(), signal, offer);
        sent = true;
        const f = await this.exchange(t, this.openFrame, left(), signal);
        if (f.type !== "opened") throw protocolError(f.type, "unexpected answer to open");
        this.init(f);
        this.attach(t, 0, f.pings === true);
        return;
      } catch (e) {
        err = e;
        if (offer?.mayBeServed) sent = true; // the open went with the request
      }
      if (signal?.aborted) {
        // Aborted: whatever the open may have started is destroyed by its
        // key before the rejection, so that nothing is left behind.
        t?.terminate();
        if (sent) await this.destroyByKey();
        throw signal.reason;
      }
      if (err instanceof Failure && (err.condition === "protocol_violation" || err.condition === "evidence_mismatch")) {
        // Fail closed: a process may run, but not as asked for.
        if (t) await this.destroyOn(t, { type: "destroy" }, this.destroyTimeout()).catch(() => {});
        t?.terminate();
        throw surface(err, "open_process");
      }
      t?.terminate();
      if (err instanceof SandboxError) {
        // A refusal starts nothing; one after a lost answer may be about
        // the process the lost one started.
        if (failed > 0) await this.destroyByKey();
        throw err;
      }
      if (err instanceof RefusedConnection && err.code === CLOSE_INVALID_FRAME && this.openFrame.open_key !== undefined && failed === 0) {
        // A server before open_key refuses the field before starting
        // anything: open again without it, losing only the repeatability.
        this.openFrame.open_key = undefined;
        continue;
      }
      if (!sent || err instanceof RefusedConnection || (err instanceof Failure && err.condition === "unauthorized")) throw surface(err, "open_process");
      failed++;
      cur = cur === 0 ? this.rmin : Math.min(2 * cur, this.rmax);
      const wait = jitter(cur);
      if (failed >= this.resumeBudget() || Date.now() + wait >= deadline) {
        await this.destroyByKey();
        const why = Date.now() + wait >= deadline ? "timed_out" : "connection_lost";
        throw contractError(why, "open_process", { message: `procwire: open_process: ${why}: ${failed} attempts: ${(err as Error).message}`, cause: err });
      }
      await sleep(wait, signal); // an abort ends the backoff, and the loop above the open
    }
  }

  private destroyTimeout(): number {
    return this.opts.destroyTimeout ?? DEFAULT_DESTROY_TIMEOUT;
  }

  private resumeBudget(): number {
    return this.opts.resumeBudget || DEFAULT_RESUME_BUDGET;
  }

  // destroyByKey destroys what the open may have started, on connections of
  // its own; the server refuses a later open with the key.
  private async destroyByKey(): Promise<void> {
    const key = this.openFrame.open_key;
    if (key === undefined) return;
    const deadline = Date.now() + this.destroyTimeout();
    let cur = 0;
    for (;;) {
      try {
        const t = await this.dial(false, Math.max(1, deadline - Date.now()));
        try {
          await this.destroyOn(t, { type: "destroy", instance_id: this.openFrame.instance_id, open_key: key }, Math.max(1, deadline - Date.now()));
          return;
        } finally {
          t.terminate();
        }
      } catch (e) {
        if (finalError(e)) return;
      }
      cur = cur === 0 ? this.rmin : Math.min(2 * cur, this.rmax);
      const wait = jitter(cur);
      if (Date.now() + wait >= deadline) return;
      await sleep(wait);
    }
  }

  private init(o: OpenedFrame): void {
    this.id = o.process_id;
    const req = this.openFrame.request;
    const want: Partial<Evidence> = {
      wire_revision: WIRE_REVISION,
      instance_id: this.openFrame.instance_id,
      process_id: o.process_id,
      executable: req.executable,
      working_directory: req.working_directory,
      arguments_digest: this.digest,
    };
    checkEvidence(o.evidence, want);
    // With compress the open lists s2 for output only (this client has no
    // compressor): any other choice is one it never offered.
    if (o.output_enc !== undefined && o.output_enc !== this.openFrame.output_enc) {
      throw protocolError("opened.output_enc", `${o.output_enc}, but the open listed ${this.openFrame.output_enc ?? "none"}`);
    }
    if (o.stdin_enc !== undefined) throw protocolError("opened.stdin_enc", `${o.stdin_enc}, but the open listed none`);
    if (o.pings && !this.pingsAsked) throw protocolError("opened.pings", "granted, but the open asked for none");
    if ((o.tty === true) !== (this.openFrame.tty !== undefined)) {
      throw protocolError("opened.tty", this.openFrame.tty ? "absent, but the open asked for a terminal" : "granted, but the open asked for none");
    }
    this.isTty = o.tty === true;
    const maxData = num(o.max_data, "opened.max_data");
    const stdoutWindow = num(o.stdout_window, "opened.stdout_window");
    const stderrWindow = o.stderr_window;
    const stdinLimit = num(o.stdin_limit, "opened.stdin_limit");
    // What the client accepts: the windows asked for, or the server's
    // default caps (64 MiB of stdout, 16 MiB of stdin) when none was.
    const outCap = this.opts.stdoutWindow ?? DEFAULT_STDOUT_CAP;
    const inCap = this.opts.stdinWindow ?? DEFAULT_STDIN_CAP;
    if (stdoutWindow > outCap) throw protocolError("opened.stdout_window", `${stdoutWindow} outside the 1..${outCap} asked for`);
    if (stdinLimit < 1 || stdinLimit > inCap) throw protocolError("opened.stdin_limit", `${stdinLimit} outside the 1..${inCap} asked for`);
    this.token = o.token;
    this.evidence = o.evidence;
    this.grace = clampMs(o.grace_ms);
    this.heartbeat = clampMs(o.heartbeat_ms);
    this.maxData = maxData;
    this.outEnc = o.output_enc;
    this.stdinWindow = stdinLimit;
    this.stdinLimit = stdinLimit;
    this.outWindow = stdoutWindow;
    this.outLimit = stdoutWindow;
    this.errCap = this.opts.stderrBuffer || Math.min(Number(stderrWindow), DEFAULT_STDERR_CAP);
  }

  // ---- the attached connection ------------------------------------------------

  private attach(t: Transport, stdinSent: number, pings: boolean): void {
    const c = new Conn(t);
    c.stdinSent = stdinSent;
    c.pings = pings;
    this.conn = c;
    this.connections++;
    const held = (t as Transport & { held?: Held }).held;
    t.onMessage = (line) => this.onMessage(c, line);
    t.onClose = (info) => this.onClose(c, info);
    t.onPong = () => {
      c.pingOut = false;
    };
    for (const line of held?.backlog ?? []) this.onMessage(c, line);
    if (held?.closed) {
      this.onClose(c, held.closed);
      return;
    }
    if (this.heartbeat > 0 && t.ping) {
      c.timer = setInterval(() => {
        if (c.pingOut) {
          t.terminate(); // no pong within heartbeat_ms: the peer is dead
          return;
        }
        c.pingOut = true;
        try {
          t.ping!();
        } catch {
          t.terminate();
        }
      }, Math.min(this.heartbeat, 2 ** 31 - 1));
    } else if (this.heartbeat > 0 && pings) {
      // Application-level pings (a WHATWG WebSocket sends no WebSocket
      // ping): one every heartbeat_ms/2. Two ticks in a row without any
      // frame (a pong or anything else) mean nothing arrived within
      // heartbeat_ms after a ping: the link is dead, and is dropped to be
      // resumed, within two heartbeats of its death.
      let seen = c.rx;
      let idle = 0;
      c.timer = setInterval(() => {
        if (c.rx !== seen) {
          seen = c.rx;
          idle = 0;
        } else if (++idle >= 2) {
          t.terminate();
          return;
        }
        try {
          t.send(encode({ type: "ping", id: c.pingID++ }));
        } catch {
          t.terminate();
        }
      }, Math.max(1, Math.min(Math.floor(this.heartbeat / 2), 2 ** 31 - 1)));
    }
    this.kick();
    this.broadcast();
  }

  private onMessage(c: Conn, line: Uint8Array): void {
    if (c.closed) return;
    c.rx++;
    try {
      this.handle1(c, this.decodeFrame(line));
    } catch (e) {
      if (e instanceof Stop) return;
      this.end(e as Error);
    }
  }

  private onClose(c: Conn, info: CloseInfo): void {
    this.dropConn(c);
    if (this.err) return;
    const err = closeError(info);
    if (finalError(err)) {
      if (info.code === CLOSE_RESUMED_ELSEWHERE) this.abandoned = true; // another client holds it now
      this.end(err);
      return;
    }
    void this.reconnect(Date.now(), err);
  }

  private dropConn(c: Conn): void {
    c.closed = true;
    clearInterval(c.timer);
    if (this.conn === c) this.conn = null;
  }

  // payload returns the raw bytes of a stdout or stderr frame: data itself,
  // or data inflated when it arrived with the encoding opened chose. The
  // carried data and the raw payload are both bounded by max_data; the
  // declared length is checked before anything is allocated.
  private payload(kind: "stdout" | "stderr", data: Uint8Array, enc: string | undefined): Uint8Array {
    if (data.length > this.maxData) throw protocolError(kind + ".data", `${data.length} bytes, max_data is ${this.maxData}`);
    if (enc === undefined) return data;
    if (enc !== this.outEnc) throw protocolError(kind + ".enc", `${enc}, but none was negotiated`);
    const raw = inflateS2(data, this.maxData);
    if (typeof raw === "string") throw protocolError(kind + ".data", `not an s2 block of 1..${this.maxData} bytes: ${raw}`);
    this.inflated++;
    return raw;
  }

  private handle1(c: Conn, f: Frame): void {
    switch (f.type) {
      case "stdout": {
        const data = this.payload("stdout", f.data, f.enc);
        const off = num(f.off, "stdout.off");
        const n = data.length;
        if (this.outEOF !== undefined) throw protocolError("stdout.off", `stdout at ${off} after stdout_eof at ${this.outEOF}`);
        if (off !== this.outReceived) throw protocolError("stdout.off", `offset ${off}, expected ${this.outReceived}`);
        if (n > this.outLimit - this.outReceived) {
          throw protocolError("stdout.data", `received ${this.outReceived + n} bytes, allowed ${this.outLimit}`);
        }
        this.outReceived += n;
        this.outQ.push(data);
        if (this.outCancelled) this.consumeOutput(this.outQ.length);
        this.wake("out");
        return;
      }
      case "stdout_eof": {
        const off = num(f.off, "stdout_eof.off");
        if (off !== this.outReceived) throw protocolError("stdout_eof.off", `offset ${off}, expected ${this.outReceived}`);
        this.outEOF = off;
        this.wake("out");
        return;
      }
      case "stderr":
        this.onStderr(num(f.off, "stderr.off"), this.payload("stderr", f.data, f.enc));
        return;
      case "exit":
        this.onExit(f);
        return;
      case "credit": {
        const received = num(f.stdin_received, "credit.stdin_received");
        const limit = num(f.stdin_limit, "credit.stdin_limit");
        if (received > c.stdinSent) throw protocolError("credit.stdin_received", `${received}, but ${c.stdinSent} bytes were sent`);
        this.checkStdinLimit("credit.stdin_limit", received, limit);
        if (received > this.inBuf.start) this.inBuf.discard(received);
        if (limit > this.stdinLimit) {
          this.stdinLimit = limit;
          this.wake("in");
        }
        return;
      }
      case "signaled": {
        const i = this.signals.findIndex((s) => s.id === f.id);
        if (i >= 0) {
          const [s] = this.signals.splice(i, 1);
          s!.resolve(f.result === "delivered");
        }
        return;
      }
      case "destroyed":
        if (f.process_id !== this.id) throw protocolError("destroyed.process_id", `${JSON.stringify(f.process_id)}, expected ${JSON.stringify(this.id)}`);
        this.settleDestroy(undefined);
        throw new Stop();
      case "error": {
        const e = sandboxError(f);
        if (f.operation === "signal_process" && f.id !== undefined) {
          // A signal the server could not deliver; the session goes on.
          const i = this.signals.findIndex((s) => s.id === f.id);
          if (i >= 0) this.signals.splice(i, 1)[0]!.reject(e);
          return;
        }
        if (f.operation === "write_stdin") {
          // The stdin stream ends here; stdout, stderr, signals and exit go on.
          this.inErr ??= e;
          this.wake("in");
          return;
        }
        // The server could not end the process: the session goes on.
        if (retryableDestroy(e) && c.destroySent && this.destroyFailed(e)) return;
        throw e;
      }
      case "pong":
        if (!c.pings) throw protocolError("pong", "a pong on a connection without pings");
        return; // counted in c.rx, which is all the heartbeat looks at
      default:
        throw protocolError(f.type, `unexpected ${f.type} frame in a session`);
    }
  }

  private onExit(f: ExitFrame): void {
    if (this.err) return; // the handle has settled without it
    const e: Exit =
      f.signal !== undefined
        ? Object.freeze(f.reason !== undefined ? { signal: f.signal, reason: f.reason } : { signal: f.signal })
        : Object.freeze({ code: Number(f.code ?? 0) });
    if (this.exit === undefined) {
      this.exit = e;
      this.exitResolve(e);
      this.wake("err"); // stderr ends after the exit
      this.wake("state");
      return;
    }
    if (this.exit.code !== e.code || this.exit.signal !== e.signal) {
      throw protocolError("exit", `${JSON.stringify(e)} after ${JSON.stringify(this.exit)}`);
    }
  }

  private onStderr(off: number, data: Uint8Array): void {
    const end = off + data.length;
    if (end <= this.errRecv) return; // held already
    if (off < this.errRecv) {
      data = data.subarray(this.errRecv - off);
      off = this.errRecv;
    }
    this.errDropped += off - this.errRecv; // the server's ring overflowed
    this.errRecv = end;
    let over = data.length - this.errCap;
    if (over > 0) {
      data = data.subarray(over);
      this.errDropped += over;
    }
    over = this.errQ.length + data.length - this.errCap;
    if (over > 0) {
      this.errQ.discard(this.errQ.start + over);
      this.errDropped += over;
    }
    this.errQ.push(data);
    this.wake("err");
  }

  private checkStdinLimit(field: string, received: number, limit: number): void {
    if (limit - received > this.stdinWindow) {
      throw protocolError(field, `${limit} is more than the ${this.stdinWindow}-byte window beyond the ${received} bytes received`);
    }
  }

  // ---- writing -------------------------------------------------------------------

  private kick(): void {
    const c = this.conn;
    if (!c || c.flushing) return;
    c.flushing = true;
    queueMicrotask(() => {
      c.flushing = false;
      if (c.closed || this.conn !== c) return;
      try {
        for (let s = this.nextFrame(c); s !== ""; s = this.nextFrame(c)) c.t.send(s);
      } catch {
        c.t.terminate(); // reported by its close
      }
    });
  }

  private nextFrame(c: Conn): string {
    if (this.destroyReq) {
      if (c.destroySent) return "";
      c.destroySent = true;
      return encode({ type: "destroy" });
    }
    if (this.err) return "";
    if (this.ackTo > c.ackSent) {
      c.ackSent = this.ackTo;
      return encode({ type: "ack", stdout: this.ackTo });
    }
    for (const s of this.signals) {
      if (s.id > c.sigSent) {
        c.sigSent = s.id;
        return encode({ type: "signal", id: s.id, signal: s.sig });
      }
    }
    if (this.winSize && this.winSize.seq > c.resizeSent) {
      c.resizeSent = this.winSize.seq;
      return encode({ type: "resize", rows: this.winSize.rows, cols: this.winSize.cols });
    }
    if (c.stdinSent < this.inBuf.end()) {
      const data = this.inBuf.from(c.stdinSent, this.maxData);
      const s = encode({ type: "stdin", off: c.stdinSent, data });
      c.stdinSent += data.length;
      this.inSent = Math.max(this.inSent, c.stdinSent);
      return s;
    }
    if (this.inClosed && !c.closeSent) {
      c.closeSent = true;
      if (!this.closeSent) {
        this.closeSent = true;
        this.wake("in");
      }
      return encode({ type: "stdin_close", off: this.inBuf.end() });
    }
    return "";
  }

  // ---- the streams ---------------------------------------------------------------

  private usable(): Error | undefined {
    if (this.destroyReq) return new Failure("destroyed", "destroy was requested");
    return this.err;
  }

  private usableInput(): Error | undefined {
    return this.usable() ?? this.inErr;
  }

  // holding reports whether a destroy() is waiting for its answer: the
  // streams wait for it rather than fail, since a destroy the server could
  // not complete leaves them usable (an errored stream stays errored).
  private holding(): boolean {
    return this.destroyReq && this.attempt !== undefined && !this.destroyed;
  }

  private async writeInput(chunk: Uint8Array): Promise<void> {
    if (!ArrayBuffer.isView(chunk)) throw new TypeError("procwire: input takes Uint8Array chunks");
    let b = new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const signal = this.inputSignal;
    while (b.length > 0) {
      if (signal?.aborted) throw signal.reason;
      if (this.holding()) {
        await this.changed("in", signal);
        continue;
      }
      const err = this.usableInput();
      if (err) throw surface(err, "write_stdin");
      if (this.inClosed) throw contractError("stdin_closed", "write_stdin");
      const avail = this.stdinLimit - this.inBuf.end();
      if (avail <= 0) {
        await this.changed("in", signal);
        continue;
      }
      const k = Math.min(avail, b.length);
      this.inBuf.pushCopy(b.subarray(0, k));
      b = b.subarray(k);
      this.kick();
    }
  }

  private async closeInput(): Promise<void> {
    if (!this.inClosed) {
      this.inClosed = true;
      this.kick();
    }
    const signal = this.inputSignal;
    while (!this.closeSent) {
      if (this.holding()) {
        await this.changed("in", signal);
        continue;
      }
      const err = this.usableInput();
      if (err) throw surface(err, "write_stdin");
      await this.changed("in", signal);
    }
  }

  private consumeOutput(n: number): Uint8Array {
    const b = this.outQ.take(n);
    this.outConsumed += b.length;
    // Batched as credit is (credit.Receiver.Grant): when the limit grows by
    // a quarter window, or when everything received was consumed and the
    // server has less than a quarter window left.
    const next = this.outWindow + this.outConsumed;
    const grow = next - this.outLimit;
    const quarter = Math.max(Math.floor(this.outWindow / 4), 1);
    const starving = this.outConsumed >= this.outReceived && this.outLimit - this.outReceived < quarter;
    if (grow > 0 && (grow >= quarter || starving)) {
      this.outLimit = next;
      this.ackTo = this.outConsumed;
      this.kick();
    }
    return b;
  }

  private async pullOutput(ctl: ReadableByteStreamController): Promise<void> {
    for (;;) {
      if (this.holding()) {
        await this.changed("out");
        continue;
      }
      if (this.destroyReq) return ctl.error(contractError("destroyed", "read_stdout"));
      const complete = this.outEOF !== undefined;
      if (this.err && !complete) return ctl.error(surface(this.err, "read_stdout")); // what is held is not trusted any more
      if (this.outQ.length > 0) return deliver(ctl, this.outQ, (n) => this.consumeOutput(n));
      if (complete) return closeBytes(ctl);
      await this.changed("out");
    }
  }

  private cancelOutput(): void {
    // The reader gave up: keep the child running by consuming what comes.
    this.outCancelled = true;
    if (this.outQ.length > 0) this.consumeOutput(this.outQ.length);
    while (this.outQ.length > 0) this.consumeOutput(this.outQ.length);
  }

  private async pullError(ctl: ReadableByteStreamController): Promise<void> {
    for (;;) {
      if (this.holding()) {
        await this.changed("err");
        continue;
      }
      if (this.destroyReq) return ctl.error(contractError("destroyed", "read_stderr"));
      const complete = this.exit !== undefined;
      if (this.err && !complete) return ctl.error(surface(this.err, "read_stderr"));
      if (this.errQ.length > 0) return deliver(ctl, this.errQ, (n) => this.errQ.take(n));
      if (complete) return closeBytes(ctl);
      await this.changed("err");
    }
  }

  // ---- wait and signal -------------------------------------------------------------

  wait(options: CallOptions = {}): Promise<Exit> {
    const { signal } = options;
    return signal ? raceSignal(this.exitPromise, signal) : this.exitPromise;
  }

  signal(name: SignalName, options: CallOptions = {}): Promise<boolean> {
    if (!SIGNALS.has(name)) return Promise.reject(new TypeError(`procwire: signal ${JSON.stringify(name)} not one of SIGINT, SIGTERM, SIGKILL`));
    const { signal } = options;
    if (signal?.aborted) return Promise.reject(signal.reason);
    const err = this.usable();
    if (err) return Promise.reject(surface(err, "signal_process"));
    const timeout = this.opts.signalTimeout ?? DEFAULT_SIGNAL_TIMEOUT;
    return new Promise<boolean>((resolve, reject) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const finish = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        const i = this.signals.indexOf(s);
        if (i >= 0) this.signals.splice(i, 1);
      };
      const onAbort = () => {
        finish();
        reject(signal!.reason);
      };
      const s: PendingSignal = {
        id: ++this.nextSig,
        sig: name,
        resolve: (d) => {
          finish();
          resolve(d);
        },
        reject: (e) => {
          finish();
          reject(e);
        },
      };
      timer = setTimeout(() => {
        finish();
        reject(contractError("timed_out", "signal_process", { message: `procwire: signal_process: timed_out: no answer to ${name} within ${timeout} ms` }));
      }, timeout);
      signal?.addEventListener("abort", onAbort, { once: true });
      this.signals.push(s);
      this.kick();
    });
  }

  // ---- the terminal ----------------------------------------------------------------

  resize(rows: number, cols: number): void {
    for (const [name, v] of [["rows", rows], ["cols", cols]] as const) {
      if (!Number.isInteger(v) || v < 1 || v > 65535) throw new RangeError(`procwire: resize ${name} ${v} outside 1..65535`);
    }
    if (!this.isTty) throw new TypeError("procwire: resize on a process without a terminal (open it with options.tty)");
    if (this.usable()) return;
    this.winSize = { rows, cols, seq: (this.winSize?.seq ?? 0) + 1 };
    this.kick();
  }

  // ---- the end of a handle --------------------------------------------------------------

  private end(err: Error): void {
    if (this.err) return;
    this.err = err;
    if (this.exit === undefined) this.exitReject(surface(err, "wait_process"));
    for (const s of this.signals.slice()) s.reject(surface(err, "signal_process"));
    this.broadcast();
    const c = this.conn;
    if (c) {
      this.dropConn(c);
      if (err instanceof Failure && err.condition === "destroyed") c.t.close();
      else c.t.terminate();
    }
    if (!this.abandoned && !this.destroyed && !processGone(err) && !this.supervising) {
      void this.destroyRemote(AUTO_DESTROY_TIMEOUT).catch(() => {});
    }
  }

  private settleDestroy(err: Error | undefined): void {
    if (!this.destroyed) {
      this.destroyed = true;
      this.destroyErr = err;
      this.settledDestroy = err === undefined ? Promise.resolve() : Promise.reject(surface(err, "destroy_process"));
      this.settledDestroy.catch(() => {});
      this.broadcast();
    }
    if (err === undefined) this.end(new Failure("destroyed", "destroyed"));
  }

  // destroyFailed records a destroy the server answered with a retryable
  // error: the process still runs and the handle goes on; the running
  // destroy() rejects with e, and a later one tries again. It reports
  // whether a destroy was waiting for the answer.
  private destroyFailed(e: SandboxError): boolean {
    const a = this.attempt;
    if ((a && a.failed) || !this.destroyReq || this.destroyed) return false;
    if (a) a.failed = e;
    this.destroyReq = false;
    if (this.conn) this.conn.destroySent = false;
    this.broadcast();
    this.kick();
    return true;
  }

  // destroy shares the running attempt among its callers. An attempt that
  // failed or timed out is forgotten, so that the next call starts a fresh
  // one, with its own abort and timer; once the server said `destroyed`,
  // every call resolves (the same promise). A caller's signal ends its own
  // wait (with signal.reason), not the attempt, which others may share and
  // which destroyTimeout bounds anyway.
  destroy(options: CallOptions = {}): Promise<void> {
    const { signal } = options;
    if (signal?.aborted) return Promise.reject(signal.reason);
    const p = this.settledDestroy ?? (this.attempt ?? this.startAttempt()).promise;
    return signal ? raceSignal(p, signal) : p;
  }

  private startAttempt(): DestroyAttempt {
    const a: DestroyAttempt = { ctl: new AbortController(), promise: Promise.resolve() };
    this.attempt = a;
    a.promise = this.runDestroy(a);
    // Settled by this attempt: every later call returns its promise.
    a.promise.then(
      () => {
        if (this.destroyed && this.destroyErr === undefined) this.settledDestroy = a.promise;
      },
      () => {}, // a caller that gave up (its signal) leaves it unobserved
    );
    return a;
  }

  private async runDestroy(a: DestroyAttempt): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      if (this.expired) throw contractError("expired", "destroy_process");
      this.destroyReq = true;
      this.broadcast(); // blocked writers and readers wait for the answer; signals end with process_destroyed
      this.redial?.();
      const timeout = this.destroyTimeout();
      const deadline = Date.now() + timeout;
      const timedOut = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          const e = contractError("timed_out", "destroy_process", { message: `procwire: destroy_process: timed_out: not confirmed within ${timeout} ms` });
          a.ctl.abort(e); // this attempt's dials and waits; a later attempt has its own
          reject(e);
        }, timeout);
      });
      timedOut.catch(() => {});
      const answered = () => this.destroyed || a.failed !== undefined || (this.err !== undefined && !this.supervising);
      if (this.conn || this.supervising) {
        // Settled by `destroyed`, failed by a retryable error, or handed
        // to the reconnection, which destroys by id.
        this.kick();
        await Promise.race([this.until(answered, a.ctl.signal), timedOut]);
      }
      if (!this.destroyed && a.failed === undefined) {
        await Promise.race([this.destroyRemote(Math.max(1, deadline - Date.now()), a.ctl.signal), timedOut]);
      }
    } catch (e) {
      if (this.destroyed && this.destroyErr === undefined) return; // the answer came on the way
      throw surface(e, "destroy_process");
    } finally {
      clearTimeout(timer);
      if (this.attempt === a) this.attempt = undefined;
      this.broadcast(); // the streams held for the answer go on, or end with process_destroyed
    }
    if (a.failed) throw a.failed; // nothing settled: the process still runs, and the next call tries again
    if (this.destroyErr) throw surface(this.destroyErr, "destroy_process");
  }

  private async until(cond: () => boolean, signal?: AbortSignal): Promise<void> {
    while (!cond()) await this.changed("state", signal);
  }

  // destroyRemote destroys by id over new connections, once at a time;
  // signal (a destroy attempt's) stops it.
  private destroyRemote(timeout: number, signal?: AbortSignal): Promise<void> {
    if (this.remoteDestroy && this.remoteSignal?.aborted) this.remoteDestroy = undefined; // an attempt gone: start afresh
    if (this.remoteDestroy) return this.remoteDestroy;
    this.remoteSignal = signal;
    const p = (async () => {
      const deadline = Date.now() + timeout;
      let cur = 0;
      let last: Error | undefined;
      for (;;) {
        if (this.destroyed) return;
        try {
          const t = await this.dial(true, Math.max(1, deadline - Date.now()), signal);
          try {
            await this.destroyVia(t, Math.max(1, deadline - Date.now()));
            return;
          } finally {
            t.terminate();
          }
        } catch (e) {
          if (e instanceof SandboxError) return; // settled with it
          if (e instanceof Failure && (e.condition === "protocol_violation" || e.condition === "evidence_mismatch")) throw e;
          last = e as Error;
        }
        cur = cur === 0 ? this.rmin : Math.min(2 * cur, this.rmax);
        const wait = jitter(cur);
        if (Date.now() + wait >= deadline || signal?.aborted) {
          throw new Failure("timed_out", `destroy not confirmed within ${timeout} ms: ${last?.message ?? "no attempt"}`);
        }
        await sleep(wait, signal);
      }
    })().finally(() => {
      if (this.remoteDestroy === p) this.remoteDestroy = undefined;
    });
    this.remoteDestroy = p;
    return p;
  }

  // destroyVia destroys by id on t and settles the destroy with the answer;
  // an answer saying the server could not end the process settles nothing.
  private async destroyVia(t: Transport, timeout: number): Promise<void> {
    try {
      await this.destroyOn(t, { type: "destroy", process_id: this.id, token: this.token }, timeout);
      this.settleDestroy(undefined);
    } catch (e) {
      if (retryableDestroy(e)) this.destroyFailed(e);
      else if (e instanceof SandboxError) this.settleDestroy(e);
      throw e;
    }
  }

  // destroyOn sends a destroy on t and waits for `destroyed`, taking an
  // `exit` on the way.
  private destroyOn(t: Transport, d: Frame, timeout: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        t.terminate();
        reject(new Failure("timed_out", `no answer to destroy within ${timeout} ms`));
      }, timeout);
      t.onMessage = (line) => {
        try {
          const f = this.decodeFrame(line);
          if (f.type === "destroyed") {
            if (this.id && f.process_id !== this.id) throw protocolError("destroyed.process_id", `${JSON.stringify(f.process_id)}, expected ${JSON.stringify(this.id)}`);
            clearTimeout(timer);
            resolve();
          } else if (f.type === "error") {
            throw sandboxError(f, "destroy_process");
          } else if (f.type === "exit") {
            this.onExit(f);
          }
        } catch (e) {
          clearTimeout(timer);
          t.terminate();
          reject(e);
        }
      };
      t.onClose = (info) => {
        clearTimeout(timer);
        reject(closeError(info));
      };
      t.send(encode(d));
      takeEarly(t);
    });
  }

  // ---- reconnection ------------------------------------------------------------------------

  private async reconnect(lost: number, why: Error): Promise<void> {
    const me = {};
    this.supervisor = me;
    const deadline = lost + this.grace;
    let cur = 0;
    let last: Error = why;
    let unanswered = 0; // resumes that reached the server and got no answer
    try {
      for (;;) {
        if (this.err) return;
        // destroy() cuts the dial, the resume or the backoff short (redial):
        // the next round destroys by id at once.
        const cut = new AbortController();
        this.redial = () => cut.abort(new Failure("connection_lost", "cut short by destroy()"));
        try {
          if (this.destroyReq) {
            const t = await this.dial(true, Math.max(1, deadline - Date.now()), this.attempt?.ctl.signal);
            try {
              await this.destroyVia(t, Math.max(1, deadline - Date.now()));
            } finally {
              t.terminate();
            }
            return;
          }
          this.reached = false;
          await this.reattach(deadline, cut.signal);
          return;
        } catch (e) {
          if (e instanceof Stop) return;
          if (cut.signal.aborted && this.destroyReq) continue;
          if (retryableDestroy(e) && !this.destroyReq) {
            // The destroy() that asked has its answer; resume the process,
            // which still runs.
            last = e;
            this.reached = false;
            continue;
          }
          if (finalError(e)) {
            this.end(e as Error);
            return;
          }
          last = e as Error;
          if (this.reached && ++unanswered >= this.resumeBudget()) {
            this.end(new Failure("connection_lost", `${unanswered} resumes in a row got no answer: ${last.message}`, { cause: last }));
            return;
          }
        }
        cur = cur === 0 ? this.rmin : Math.min(2 * cur, this.rmax);
        const wait = jitter(cur);
        if (Date.now() + wait >= deadline) {
          this.abandoned = true; // the server expires it, if it is there at all
          this.expired = true;
          const shutdown = [why, last].some((e) => e instanceof LostConnection && e.code === CLOSE_GOING_AWAY);
          this.end(new Failure(shutdown ? "server_shutdown" : "connection_lost", `no resume within the ${this.grace} ms grace: ${last.message}`, { cause: last }));
          return;
        }
        await sleep(wait, cut.signal);
      }
    } finally {
      // A reconnection started from within this one (a connection it
      // attached was lost at once) supervises now: leave it the flag (and
      // its redial).
      if (this.supervisor === me) {
        this.supervisor = undefined;
        this.redial = undefined;
        this.broadcast();
        if (this.err && !this.abandoned && !this.destroyed && !processGone(this.err) && !this.destroyReq) {
          void this.destroyRemote(AUTO_DESTROY_TIMEOUT).catch(() => {});
        }
      }
    }
  }

  // A dial or resume the network swallows (a handshake whose answer never
  // comes) is abandoned after the heartbeat, the bound within which the
  // server answers a live connection (at least a second, which a loaded
  // machine may need), and another made, rather than waited for until the
  // grace ends; as the Go client does.
  private async reattach(deadline: number, signal: AbortSignal): Promise<void> {
    const end = Math.min(deadline, Date.now() + Math.max(this.heartbeat, 1000));
    const resume: ResumeFrame = { type: "resume", process_id: this.id, token: this.token, stdout_received: this.outReceived, stderr_received: this.errRecv };
    if (this.pingsAsked) resume.pings = true;
    const t = await this.dial(true, Math.max(1, end - Date.now()), signal, { line: encode(resume) });
    this.reached = true;
    try {
      const f = await this.exchange(t, resume, Math.max(1, end - Date.now()), signal);
      if (f.type !== "resumed") throw protocolError(f.type, "unexpected answer to resume");
      this.checkResumed(f);
      if (this.err) throw new Stop();
      this.attach(t, num(f.stdin_received, "resumed.stdin_received"), f.pings === true);
    } catch (e) {
      t.terminate();
      throw e;
    }
  }

  private checkResumed(r: ResumedFrame): void {
    if (r.process_id !== this.id) {
      throw new Failure("evidence_mismatch", `process_id ${JSON.stringify(r.process_id)}, expected ${JSON.stringify(this.id)}`);
    }
    checkEvidence(r.evidence, this.evidence);
    if (r.pings && !this.pingsAsked) throw protocolError("resumed.pings", "granted, but the resume asked for none");
    const received = num(r.stdin_received, "resumed.stdin_received");
    const limit = num(r.stdin_limit, "resumed.stdin_limit");
    if (received < this.inBuf.start || received > this.inSent) {
      throw protocolError("resumed.stdin_received", `${received} outside the ${this.inBuf.start}..${this.inSent} the client holds and sent`);
    }
    this.checkStdinLimit("resumed.stdin_limit", received, limit);
    this.inBuf.discard(received);
    if (limit > this.stdinLimit) this.stdinLimit = limit; // a limit that moves backwards is ignored
  }
}

// deliver hands what q holds to the reader: copied into a BYOB reader's
// view as far as it holds (take consumes no more), or the front chunk
// itself, transferred to a default reader (every chunk owns its
// ArrayBuffer: see decodeBase64).
function deliver(ctl: ReadableByteStreamController, q: ByteQueue, take: (n: number) => Uint8Array): void {
  const req = ctl.byobRequest;
  if (req?.view) {
    const v = req.view;
    const dst = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
    let n = 0;
    while (n < dst.length && q.length > 0) {
      const b = take(dst.length - n);
      dst.set(b, n);
      n += b.length;
    }
    req.respond(n);
    return;
  }
  ctl.enqueue(take(q.length) as Bytes);
}

// closeBytes ends a byte stream, releasing a BYOB read that waits.
function closeBytes(ctl: ReadableByteStreamController): void {
  ctl.close();
  ctl.byobRequest?.respond(0);
}

// checkEvidence names the first field of got that differs from want;
// fields want lacks are not compared.
function checkEvidence(got: Evidence, want: Partial<Evidence>): void {
  for (const k of EVIDENCE_FIELDS) {
    const w = want[k];
    if (w === undefined) continue;
    if (got[k] !== w) {
      throw new Failure("evidence_mismatch", `evidence.${k} ${JSON.stringify(got[k])}, expected ${JSON.stringify(w)}`);
    }
  }
}

function clampMs(v: Int): number {
  return typeof v === "bigint" || v > Number.MAX_SAFE_INTEGER ? Number.MAX_SAFE_INTEGER : v;
}

// closeError is what a connection's end means for the handle.
function closeError(info: CloseInfo): Error {
  if (info.error) return info.error;
  const why = info.reason ? `${info.code} ${info.reason}` : String(info.code);
  switch (info.code) {
    case CLOSE_RESUMED_ELSEWHERE:
      return new Failure("resumed_elsewhere", "the process was resumed on another connection");
    case CLOSE_PROTOCOL_ERROR:
    case 1003: // unsupported data: the WebSocket's own, not one of PROTOCOL.md §7
    case CLOSE_INVALID_FRAME:
    case CLOSE_POLICY_VIOLATION:
    case CLOSE_MESSAGE_TOO_BIG:
      return new RefusedConnection(`the server refused the connection: ${why}`, info.code);
  }
  return new LostConnection(`closed: ${why}`, info.code);
}

// RefusedConnection: the server closed for a violation; not retried.
class RefusedConnection extends Failure {
  constructor(
    message: string,
    readonly code: number,
  ) {
    super("protocol_violation", message);
  }
}
// LostConnection: a close without procwire's word; resumed.
class LostConnection extends Failure {
  constructor(
    message: string,
    readonly code: number,
  ) {
    super("connection_lost", message);
  }
}

// finalError reports whether err ends the handle instead of being retried:
// the server's word, or a condition no retry gets past.
function finalError(e: unknown): boolean {
  if (e instanceof SandboxError) return true;
  if (!(e instanceof Failure)) return false;
  return e.condition !== "connection_lost" && e.condition !== "connection_failed" && e.condition !== "timed_out";
}

// processGone reports whether err says the process is gone on the server,
// so there is nothing to destroy.
function processGone(err: unknown): boolean {
  if (err instanceof Failure) return err.condition === "destroyed" || err.condition === "expired" || err.condition === "server_shutdown";
  if (!(err instanceof SandboxError)) return false;
  if (err.actual === "process_not_found" || err.actual === "process_destroyed" || err.actual === "process_expired") return true;
  return err.reason === "server_shutdown";
}

// hold buffers what t delivers until attach takes it over: frames that
// follow an answer in the same read must not be lost.
function hold(t: Transport): void {
  const held: Held = { backlog: [] };
  t.onMessage = (l) => held.backlog.push(l);
  t.onClose = (i) => {
    held.closed = i;
  };
  (t as Transport & { held?: Held }).held = held;
}

interface Held {
  backlog: Uint8Array[];
  closed?: CloseInfo;
}
