// openProcess: one remote process's stdio as Web Streams, with
// reconnection, resume, credit and acknowledgement hidden from the caller.
// The behaviour follows the Go client (client/): the same limits, the same
// evidence checks, the same ends of a handle.

import {
  CLIENT_FRAMES,
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
  type OpenFrame,
  type OpenedFrame,
  type ProcessRequest,
  type ResumedFrame,
} from "./frames.js";
import {
  ConnectionLost,
  Destroyed,
  ProcwireError,
  SandboxError,
  SandboxOperationFailed,
  SandboxProtocolInvalid,
  processGone,
  protocolError,
  sandboxError,
} from "./errors.js";
import { dial, isWsClass, webSocketClass, type CloseInfo, type Transport, type WebSocketClass } from "./transport.js";

/** Options of openProcess. Every field is optional. */
export interface OpenOptions {
  /** Bearer token for the upgrade's Authorization header. */
  token?: string;
  /** More HTTP headers for every upgrade (ws only). */
  headers?: Record<string, string>;
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
  /** Bound on destroy(), and on the destroy the client makes itself after a failure, in ms (default 10,000). */
  destroyTimeout?: number;
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
  /** Aborts the open. */
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
  /** Settles once with the exit; the same promise (and object) every time. */
  wait(): Promise<Exit>;
  /** Sends a signal to the child's process group: true if delivered, false if it had exited. */
  signal(name: SignalName): Promise<boolean>;
  /**
   * Destroys the process; bounded by destroyTimeout. Once settled it is
   * idempotent (the same promise every time). When the server could not
   * end the process (a SandboxOperationFailed with operation
   * destroy_process and reason processes_survived, destroy_timeout or
   * destroy_failed), nothing is settled: the promise rejects with that
   * error, the process still runs, the handle goes on driving it, and a
   * later destroy() tries again.
   */
  destroy(): Promise<void>;
  /** stderr bytes dropped by the server's ring or the local bound. */
  errorDropped(): number;
  /** Byte counts so far. */
  progress(): Progress;
}

const DEFAULT_RECONNECT_MIN = 50;
const DEFAULT_RECONNECT_MAX = 2000;
const DEFAULT_OPEN_TIMEOUT = 30_000;
const DEFAULT_DESTROY_TIMEOUT = 10_000;
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
  };
  const bad = validate(open);
  if (bad) throw bad;
  const C = await webSocketClass(options.WebSocket);
  const p = new Proc(url, open, options, C, rmin, rmax, await argumentsDigest(open.request.arguments));
  await p.open();
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
  destroySent = false;
  closed = false;
  pingOut = false;
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

// DestroyAttempt is one run of destroy(): failed holds the server's answer
// when it could not end the process.
interface DestroyAttempt {
  failed?: SandboxError;
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
  destroyed = false; // a destroy settled, with destroyErr
  destroyErr: Error | undefined;
  destroyPromise: Promise<void> | undefined;
  remoteDestroy: Promise<void> | undefined;
  destroyAbort = new AbortController();
  err: Error | undefined; // why the handle ended; set once
  supervising = false;
  reached = false; // the last resume's dial reached the server

  private waiters: (() => void)[] = [];
  private redial: (() => void) | undefined;

  readonly input: WritableStream<Uint8Array>;
  readonly output: ReadableStream<Bytes>;
  readonly error: ReadableStream<Bytes>;

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
    this.input = new WritableStream<Uint8Array>(
      {
        write: (chunk) => this.writeInput(chunk),
        close: () => this.closeInput(),
        abort: () => this.destroy(),
      },
      new ByteLengthQueuingStrategy({ highWaterMark: STDIN_CHUNK }),
    );
    this.output = new ReadableStream<Bytes>(
      { pull: (c) => this.pullOutput(c), cancel: () => this.cancelOutput() },
      { highWaterMark: 0 },
    );
    this.error = new ReadableStream<Bytes>({ pull: (c) => this.pullError(c) }, { highWaterMark: 0 });
  }

  handle(): ProcessHandle {
    return {
      processId: this.id,
      evidence: Object.freeze({ ...this.evidence }),
      input: this.input,
      output: this.output,
      error: this.error,
      wait: () => this.exitPromise,
      signal: (name) => this.signal(name),
      destroy: () => this.destroy(),
      errorDropped: () => this.errDropped,
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
  }

  // ---- notification ----------------------------------------------------------

  private changed(): Promise<void> {
    return new Promise((res) => this.waiters.push(res));
  }

  private broadcast(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  // ---- dialing ---------------------------------------------------------------

  private headers(byProcess: boolean): Record<string, string> {
    const h: Record<string, string> = { ...(this.opts.headers ?? {}) };
    if (this.opts.token) h["Authorization"] = "Bearer " + this.opts.token;
    if (isWsClass(this.C)) {
      h["Procwire-Instance"] = this.openFrame.instance_id;
      if (byProcess && this.id) h["Procwire-Process"] = this.id;
    }
    return h;
  }

  private dial(byProcess: boolean, timeout: number, signal?: AbortSignal): Promise<Transport> {
    return dial(this.C, this.url, this.headers(byProcess), timeout, signal);
  }

  // exchange sends a first frame and returns the first answer, or throws.
  private exchange(t: Transport, first: Frame, timeout: number, signal?: AbortSignal): Promise<Frame> {
    return new Promise<Frame>((resolve, reject) => {
      const timer = setTimeout(() => {
        t.terminate();
        reject(new ConnectionLost(`procwire: no answer to ${first.type} within ${timeout} ms`));
      }, timeout);
      const onAbort = () => {
        t.terminate();
        reject(new ConnectionLost(`procwire: ${first.type} aborted`));
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
      t.send(encode(first));
    });
  }

  private decodeFrame(line: Uint8Array): Frame {
    let f: Frame;
    try {
      f = decode(line, MAX_LINE);
    } catch (e) {
      if (e instanceof DecodeError) {
        throw new SandboxProtocolInvalid("open_process", e.frame + (e.frame && e.field ? "." : "") + e.field, e.message, { cause: e });
      }
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
    this.openFrame.open_key = randomHex(32);
    let sent = false; // an open may have reached the server
    let failed = 0;
    let cur = 0;
    for (;;) {
      let err: unknown;
      let t: Transport | undefined;
      try {
        t = await this.dial(false, left(), this.opts.signal);
        sent = true;
        const f = await this.exchange(t, this.openFrame, left(), this.opts.signal);
        if (f.type !== "opened") throw protocolError(f.type, "unexpected answer to open");
        this.init(f);
        this.attach(t, 0);
        return;
      } catch (e) {
        err = e;
      }
      if (err instanceof SandboxProtocolInvalid) {
        // Fail closed: a process may run, but not as asked for.
        if (t) await this.destroyOn(t, { type: "destroy" }, this.destroyTimeout()).catch(() => {});
        t?.terminate();
        throw err;
      }
      t?.terminate();
      if (err instanceof SandboxError) {
        // A refusal starts nothing; one after a lost answer may be about
        // the process the lost one started.
        if (failed > 0) await this.destroyByKey();
        throw err;
      }
      if (err instanceof RefusedConnection && err.code === 1007 && this.openFrame.open_key !== undefined && failed === 0) {
        // A server before open_key refuses the field before starting
        // anything: open again without it, losing only the repeatability.
        this.openFrame.open_key = undefined;
        continue;
      }
      if (!sent || err instanceof RefusedConnection) throw err;
      failed++;
      cur = cur === 0 ? this.rmin : Math.min(2 * cur, this.rmax);
      const wait = jitter(cur);
      if (failed >= this.resumeBudget() || Date.now() + wait >= deadline || this.opts.signal?.aborted) {
        await this.destroyByKey();
        throw new ConnectionLost(`procwire: open: ${failed} attempts: ${(err as Error).message}`);
      }
      await new Promise((r) => setTimeout(r, wait));
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
      await new Promise((r) => setTimeout(r, wait));
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

  private attach(t: Transport, stdinSent: number): void {
    const c = new Conn(t);
    c.stdinSent = stdinSent;
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
    }
    this.kick();
    this.broadcast();
  }

  private onMessage(c: Conn, line: Uint8Array): void {
    if (c.closed) return;
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
      if (info.code === 4001) this.abandoned = true; // another client holds it now
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
        this.broadcast();
        return;
      }
      case "stdout_eof": {
        const off = num(f.off, "stdout_eof.off");
        if (off !== this.outReceived) throw protocolError("stdout_eof.off", `offset ${off}, expected ${this.outReceived}`);
        this.outEOF = off;
        this.broadcast();
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
          this.broadcast();
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
          this.broadcast();
          return;
        }
        // The server could not end the process: the session goes on.
        if (retryableDestroy(e) && c.destroySent && this.destroyFailed(e)) return;
        throw e;
      }
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
      this.broadcast();
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
    this.broadcast();
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
        this.broadcast();
      }
      return encode({ type: "stdin_close", off: this.inBuf.end() });
    }
    return "";
  }

  // ---- the streams ---------------------------------------------------------------

  private usable(): Error | undefined {
    if (this.destroyReq) return new Destroyed();
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
    while (b.length > 0) {
      if (this.holding()) {
        await this.changed();
        continue;
      }
      const err = this.usableInput();
      if (err) throw err;
      if (this.inClosed) throw new ProcwireError("procwire: stdin closed");
      const avail = this.stdinLimit - this.inBuf.end();
      if (avail <= 0) {
        await this.changed();
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
    while (!this.closeSent) {
      if (this.holding()) {
        await this.changed();
        continue;
      }
      const err = this.usableInput();
      if (err) throw err;
      await this.changed();
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

  private async pullOutput(ctl: ReadableStreamDefaultController<Bytes>): Promise<void> {
    for (;;) {
      if (this.holding()) {
        await this.changed();
        continue;
      }
      if (this.destroyReq) return ctl.error(new Destroyed());
      const complete = this.outEOF !== undefined;
      if (this.err && !complete) return ctl.error(this.err); // what is held is not trusted any more
      if (this.outQ.length > 0) return ctl.enqueue(this.consumeOutput(this.outQ.length) as Bytes);
      if (complete) return ctl.close();
      await this.changed();
    }
  }

  private cancelOutput(): void {
    // The reader gave up: keep the child running by consuming what comes.
    this.outCancelled = true;
    if (this.outQ.length > 0) this.consumeOutput(this.outQ.length);
    while (this.outQ.length > 0) this.consumeOutput(this.outQ.length);
  }

  private async pullError(ctl: ReadableStreamDefaultController<Bytes>): Promise<void> {
    for (;;) {
      if (this.holding()) {
        await this.changed();
        continue;
      }
      if (this.destroyReq) return ctl.error(new Destroyed());
      const complete = this.exit !== undefined;
      if (this.err && !complete) return ctl.error(this.err);
      if (this.errQ.length > 0) return ctl.enqueue(this.errQ.take(this.errQ.length) as Bytes);
      if (complete) return ctl.close();
      await this.changed();
    }
  }

  // ---- signal ------------------------------------------------------------------------

  signal(name: SignalName): Promise<boolean> {
    if (!SIGNALS.has(name)) return Promise.reject(new TypeError(`procwire: signal ${JSON.stringify(name)} not one of SIGINT, SIGTERM, SIGKILL`));
    const err = this.usable();
    if (err) return Promise.reject(err);
    return new Promise<boolean>((resolve, reject) => {
      this.signals.push({ id: ++this.nextSig, sig: name, resolve, reject });
      this.kick();
    });
  }

  // ---- the end of a handle --------------------------------------------------------------

  private end(err: Error): void {
    if (this.err) return;
    this.err = err;
    if (this.exit === undefined) this.exitReject(err);
    for (const s of this.signals.splice(0)) s.reject(err);
    this.broadcast();
    const c = this.conn;
    if (c) {
      this.dropConn(c);
      if (err instanceof Destroyed) c.t.close();
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
      this.broadcast();
    }
    if (err === undefined) this.end(new Destroyed());
  }

  // destroyFailed records a destroy attempt the server answered with a
  // retryable error: the process still runs and the handle goes on; the
  // running destroy() rejects with e, and a later one tries again. It
  // reports whether an attempt was waiting for the answer.
  private destroyFailed(e: SandboxError): boolean {
    const a = this.attempt;
    if (!a || a.failed || !this.destroyReq || this.destroyed) return false;
    a.failed = e;
    this.destroyReq = false;
    if (this.conn) this.conn.destroySent = false;
    this.broadcast();
    this.kick();
    return true;
  }

  // destroy memoises the running attempt, so concurrent callers share its
  // outcome; an attempt the server could not complete is forgotten, so the
  // next call tries again.
  destroy(): Promise<void> {
    this.destroyPromise ??= this.runDestroy();
    return this.destroyPromise;
  }

  private async runDestroy(): Promise<void> {
    const attempt: DestroyAttempt = {};
    this.attempt = attempt;
    this.destroyReq = true;
    this.broadcast(); // blocked writers and readers wait for the answer; signals end with Destroyed
    this.redial?.();
    const timeout = this.destroyTimeout();
    const deadline = Date.now() + timeout;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        this.destroyAbort.abort();
        reject(new ConnectionLost(`procwire: destroy not confirmed within ${timeout} ms`));
      }, timeout);
    });
    const answered = () => this.destroyed || attempt.failed !== undefined || (this.err !== undefined && !this.supervising);
    try {
      if (this.conn) {
        this.kick();
        // Settled by `destroyed`, failed by a retryable error, or handed
        // to the reconnection, which destroys by id.
        await Promise.race([this.until(answered), timedOut]);
      } else if (this.supervising) {
        await Promise.race([this.until(answered), timedOut]);
      }
      if (!this.destroyed && attempt.failed === undefined) {
        await Promise.race([this.destroyRemote(Math.max(1, deadline - Date.now())), timedOut]);
      }
    } finally {
      clearTimeout(timer);
      this.attempt = undefined;
      this.broadcast(); // the streams held for the answer go on, or end with Destroyed
    }
    if (attempt.failed) {
      // Nothing settled: the process still runs, and the next call tries again.
      this.destroyPromise = undefined;
      throw attempt.failed;
    }
    if (this.destroyErr) throw this.destroyErr;
  }

  private async until(cond: () => boolean): Promise<void> {
    while (!cond()) await this.changed();
  }

  // destroyRemote destroys by id over new connections, once at a time.
  private destroyRemote(timeout: number): Promise<void> {
    this.remoteDestroy ??= (async () => {
      const deadline = Date.now() + timeout;
      let cur = 0;
      let last: Error | undefined;
      for (;;) {
        if (this.destroyed) return;
        try {
          const t = await this.dial(true, Math.max(1, deadline - Date.now()), this.destroyAbort.signal);
          try {
            await this.destroyVia(t, Math.max(1, deadline - Date.now()));
            return;
          } finally {
            t.terminate();
          }
        } catch (e) {
          if (e instanceof SandboxError) return; // settled with it
          if (e instanceof SandboxProtocolInvalid) throw e;
          last = e as Error;
        }
        cur = cur === 0 ? this.rmin : Math.min(2 * cur, this.rmax);
        const wait = jitter(cur);
        if (Date.now() + wait >= deadline || this.destroyAbort.signal.aborted) {
          throw new ConnectionLost(`procwire: destroy not confirmed within ${timeout} ms: ${last?.message ?? "no attempt"}`);
        }
        await new Promise((r) => setTimeout(r, wait));
      }
    })().finally(() => {
      this.remoteDestroy = undefined;
    });
    return this.remoteDestroy;
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
        reject(new ConnectionLost(`procwire: no answer to destroy within ${timeout} ms`));
      }, timeout);
      t.onMessage = (line) => {
        try {
          const f = this.decodeFrame(line);
          if (f.type === "destroyed") {
            if (this.id && f.process_id !== this.id) throw protocolError("destroyed.process_id", `${JSON.stringify(f.process_id)}, expected ${JSON.stringify(this.id)}`);
            clearTimeout(timer);
            resolve();
          } else if (f.type === "error") {
            throw sandboxError(f);
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
    });
  }

  // ---- reconnection ------------------------------------------------------------------------

  private async reconnect(lost: number, why: Error): Promise<void> {
    this.supervising = true;
    const deadline = lost + this.grace;
    let cur = 0;
    let last: Error = why;
    let unanswered = 0; // resumes that reached the server and got no answer
    try {
      for (;;) {
        if (this.err) return;
        try {
          if (this.destroyReq) {
            const t = await this.dial(true, Math.max(1, deadline - Date.now()), this.destroyAbort.signal);
            try {
              await this.destroyVia(t, Math.max(1, deadline - Date.now()));
            } finally {
              t.terminate();
            }
            return;
          }
          this.reached = false;
          await this.reattach(deadline);
          return;
        } catch (e) {
          if (e instanceof Stop) return;
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
            this.end(new ConnectionLost(`procwire: connection lost: ${unanswered} resumes in a row got no answer: ${last.message}`));
            return;
          }
        }
        cur = cur === 0 ? this.rmin : Math.min(2 * cur, this.rmax);
        const wait = jitter(cur);
        if (Date.now() + wait >= deadline) {
          this.abandoned = true; // the server expires it, if it is there at all
          this.end(new ConnectionLost(`procwire: connection lost: no resume within the ${this.grace} ms grace: ${last.message}`));
          return;
        }
        await new Promise<void>((r) => {
          const timer = setTimeout(r, wait);
          this.redial = () => {
            clearTimeout(timer);
            r();
          };
        });
        this.redial = undefined;
      }
    } finally {
      this.supervising = false;
      this.broadcast();
      if (this.err && !this.abandoned && !this.destroyed && !processGone(this.err) && !this.destroyReq) {
        void this.destroyRemote(AUTO_DESTROY_TIMEOUT).catch(() => {});
      }
    }
  }

  private async reattach(deadline: number): Promise<void> {
    const t = await this.dial(true, Math.max(1, deadline - Date.now()), this.destroyAbort.signal);
    this.reached = true;
    try {
      const f = await this.exchange(
        t,
        { type: "resume", process_id: this.id, token: this.token, stdout_received: this.outReceived, stderr_received: this.errRecv },
        Math.max(1, deadline - Date.now()),
        this.destroyAbort.signal,
      );
      if (f.type !== "resumed") throw protocolError(f.type, "unexpected answer to resume");
      this.checkResumed(f);
      if (this.err) throw new Stop();
      this.attach(t, num(f.stdin_received, "resumed.stdin_received"));
    } catch (e) {
      t.terminate();
      throw e;
    }
  }

  private checkResumed(r: ResumedFrame): void {
    if (r.process_id !== this.id) {
      throw new SandboxProtocolInvalid("open_process_identity", "process_id", `${JSON.stringify(r.process_id)}, expected ${JSON.stringify(this.id)}`);
    }
    checkEvidence(r.evidence, this.evidence);
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

// checkEvidence names the first field of got that differs from want;
// fields want lacks are not compared.
function checkEvidence(got: Evidence, want: Partial<Evidence>): void {
  for (const k of EVIDENCE_FIELDS) {
    const w = want[k];
    if (w === undefined) continue;
    if (got[k] !== w) {
      throw new SandboxProtocolInvalid("open_process_identity", "evidence." + k, `${JSON.stringify(got[k])}, expected ${JSON.stringify(w)}`);
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
    case 4001:
      return new ResumedElsewhere("procwire: connection lost: the process was resumed on another connection");
    case 1002:
    case 1003:
    case 1007:
    case 1008:
    case 1009:
      return new RefusedConnection(`procwire: connection lost: the server refused the connection: ${why}`, info.code);
  }
  return new LostConnection(`procwire: connection lost: ${why}`);
}

// RefusedConnection: the server closed for a violation; not retried.
class RefusedConnection extends ConnectionLost {
  constructor(
    message: string,
    readonly code: number,
  ) {
    super(message);
  }
}
// ResumedElsewhere: another connection took the process (4001); not retried.
class ResumedElsewhere extends ConnectionLost {}
// LostConnection: a close without procwire's word; resumed.
class LostConnection extends ConnectionLost {}

// finalError reports whether err ends the handle instead of being retried.
function finalError(e: unknown): boolean {
  return e instanceof SandboxError || e instanceof SandboxProtocolInvalid || e instanceof RefusedConnection || e instanceof ResumedElsewhere;
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
