// @procwire/effect: the procwire client's openProcess as a scoped Effect.
//
// The process is a resource of the scope: acquiring it opens the process
// (interruptibly: an interrupted open leaves nothing behind), and closing
// the scope destroys it, bounded. stdout and stderr are Streams, stdin a
// Sink whose end is the half-close, and every error is the client's own
// tagged contract error, so Effect.catchTag("SandboxLifecycleConflict", …)
// works on it.

import { Duration, Effect, Sink, Stream } from "effect";
import type { Scope } from "effect";
import {
  openProcess as openHandle,
  SandboxError,
  SandboxOperationFailed,
  type AnySandboxError,
  type Bytes,
  type Evidence,
  type Exit,
  type OpenOptions,
  type ProcessHandle,
  type ProcessRequest,
  type SignalName,
} from "@procwire/client";

export type { AnySandboxError, Bytes, Evidence, Exit, ProcessHandle, ProcessRequest, SignalName } from "@procwire/client";
export {
  SandboxError,
  SandboxOperationFailed,
  SandboxLifecycleConflict,
  SandboxCapabilityUnavailable,
  SandboxInstanceNotFound,
} from "@procwire/client";

/** The default bound on the release's destroy. */
export const DEFAULT_RELEASE_TIMEOUT: Duration.Input = "30 seconds";

/** The default grace of terminate, between SIGTERM and destroy. */
export const DEFAULT_TERMINATE_GRACE: Duration.Input = "5 seconds";

/** Options of openProcess: the client's, without its AbortSignal (interruption replaces it). */
export interface EffectOpenOptions extends Omit<OpenOptions, "signal"> {
  /**
   * Bound on the destroy the scope's release makes (default 30 seconds).
   * The client's own destroyTimeout defaults to a second more, so that
   * this bound is the one that holds.
   */
  readonly releaseTimeout?: Duration.Input;
}

/** The raw Web Streams and handle under a ProcwireProcess, for the Runner's own checks. */
export interface RawStreams {
  /** The child's stdin: close() is the half-close, abort() destroys. */
  readonly input: WritableStream<Uint8Array>;
  /** The child's stdout. */
  readonly output: ReadableStream<Bytes>;
  /** The child's stderr. */
  readonly error: ReadableStream<Bytes>;
  /** The client's handle itself. */
  readonly handle: ProcessHandle;
}

/** One remote process, as a resource of a Scope. */
export interface ProcwireProcess {
  /** The server's process id. */
  readonly processId: string;
  /** The server-authored evidence, checked against the request. */
  readonly evidence: Readonly<Evidence>;
  /**
   * The child's stdout: lossless, with a real end. Reading it is what lets
   * the child write more. A run reads on from where the previous run
   * stopped (an interrupted run releases the stream, it does not cancel
   * it); two runs at once fail, as a Web stream has one reader.
   */
  readonly stdout: Stream.Stream<Bytes, AnySandboxError>;
  /** The child's stderr: bounded, best effort; ends after the exit. Runs as stdout's. */
  readonly stderr: Stream.Stream<Bytes, AnySandboxError>;
  /**
   * The child's stdin. Each chunk is written once the server's credit takes
   * it (backpressure); the end of the stream run into it is the half-close
   * (the child reads EOF). Interrupting the fiber that runs it only lets go
   * of stdin: it never destroys the process, and a later run writes on.
   */
  readonly stdin: Sink.Sink<void, Uint8Array, never, AnySandboxError>;
  /** The exit, once: the same value on every run. */
  readonly wait: Effect.Effect<Exit, AnySandboxError>;
  /** Sends a signal to the child's process group: true if delivered, false if it had exited. */
  signal(name: SignalName): Effect.Effect<boolean, AnySandboxError>;
  /** Destroys the process (idempotent once it succeeded), bounded by the client's destroyTimeout. */
  readonly destroy: Effect.Effect<void, AnySandboxError>;
  /**
   * The contract's Checkpoint release: SIGTERM, then the exit within grace
   * (default 5 seconds), then destroy whatever happened. It succeeds with
   * the exit seen within the grace, or undefined when the child outlived
   * it and was destroyed.
   */
  terminate(grace?: Duration.Input): Effect.Effect<Exit | undefined, AnySandboxError>;
  /** The raw Web Streams and the client's handle. */
  readonly raw: RawStreams;
}

type WithSignal = { signal?: AbortSignal };

/**
 * call runs a promise-returning client call as an Effect: interrupting it
 * aborts the call's signal; a rejection with a contract error is a typed
 * failure, anything else (a TypeError for misuse) a defect.
 */
function call<A>(f: (signal: AbortSignal) => Promise<A>): Effect.Effect<A, AnySandboxError> {
  return Effect.callback<A, AnySandboxError>((resume, signal) => {
    let p: Promise<A>;
    try {
      p = f(signal);
    } catch (e) {
      resume(Effect.die(e));
      return;
    }
    p.then(
      (a) => resume(Effect.succeed(a)),
      (e: unknown) => resume(e instanceof SandboxError ? Effect.fail(e as AnySandboxError) : Effect.die(e)),
    );
  });
}

function readable(evaluate: () => ReadableStream<Bytes>): Stream.Stream<Bytes, AnySandboxError> {
  return Stream.fromReadableStream({
    evaluate,
    // A contract error fails the stream; the reader's own misuse dies.
    onError: (e): AnySandboxError => {
      if (e instanceof SandboxError) return e as AnySandboxError;
      throw e;
    },
    releaseLockOnEnd: true,
  });
}

/** Whether a failed release destroy still means the process is gone. */
function gone(e: AnySandboxError): boolean {
  return e._tag === "SandboxLifecycleConflict" && (e.actual === "process_destroyed" || e.actual === "process_expired");
}

function wrap(h: ProcessHandle): ProcwireProcess {
  const handle = h as ProcessHandle & {
    signal(name: SignalName, options?: WithSignal): Promise<boolean>;
    destroy(options?: WithSignal): Promise<void>;
    wait(options?: WithSignal): Promise<Exit>;
  };
  const wait = call((signal) => handle.wait({ signal }));
  const destroy = call((signal) => handle.destroy({ signal }));
  const signal = (name: SignalName) => call((s) => handle.signal(name, { signal: s }));

  // stdin: one writer per chunk, released after its write. An interrupted
  // write releases the writer and leaves the stream as it is (never
  // abort(), which would destroy the process).
  const write = (chunk: Uint8Array) =>
    Effect.acquireUseRelease(
      Effect.sync(() => handle.input.getWriter()),
      (w) => call(() => w.write(chunk)),
      (w) => Effect.sync(() => w.releaseLock()),
    );
  const halfClose = Effect.acquireUseRelease(
    Effect.sync(() => handle.input.getWriter()),
    (w) => call(() => w.close()),
    (w) => Effect.sync(() => w.releaseLock()),
  );
  const stdin = Sink.forEach(write).pipe(Sink.mapEffect(() => halfClose));

  const terminate = (grace: Duration.Input = DEFAULT_TERMINATE_GRACE) =>
    Effect.gen(function* () {
      yield* signal("SIGTERM");
      const exit = yield* wait.pipe(Effect.timeoutOrElse({ duration: grace, orElse: () => Effect.succeed(undefined) }));
      yield* destroy;
      return exit;
    });

  return {
    processId: handle.processId,
    evidence: handle.evidence,
    stdout: readable(() => handle.output),
    stderr: readable(() => handle.error),
    stdin,
    wait,
    signal,
    destroy,
    terminate,
    raw: { input: handle.input, output: handle.output, error: handle.error, handle },
  };
}

/**
 * Opens a process on a procwire server as a resource of the scope.
 *
 * Acquiring is interruptible: an interrupted open aborts the client's open,
 * which destroys whatever the server had started and leaves no socket or
 * timer behind. Closing the scope destroys the process, bounded by
 * `releaseTimeout` (30 seconds): a release that does not finish in time, or
 * whose destroy fails (other than finding the process already gone), ends
 * the scope with the typed error as a defect, since an Effect finalizer has
 * no error channel: SandboxOperationFailed{operation: "destroy_process",
 * reason: "timed_out"} for the bound. Call `destroy` (or `terminate`) in the
 * scope to handle a failed destroy in the typed channel; the release then
 * finds the process destroyed and succeeds.
 */
export function openProcess(
  url: string,
  instanceId: string,
  request: ProcessRequest,
  options: EffectOpenOptions = {},
): Effect.Effect<ProcwireProcess, AnySandboxError, Scope.Scope> {
  const { releaseTimeout = DEFAULT_RELEASE_TIMEOUT, ...rest } = options;
  const bound = Duration.toMillis(releaseTimeout);
  const clientOptions: OpenOptions = { destroyTimeout: bound + 1000, ...rest };
  return Effect.acquireRelease(
    call((signal) => openHandle(url, instanceId, request, { ...clientOptions, signal })).pipe(Effect.map(wrap)),
    (p) =>
      p.destroy.pipe(
        Effect.timeoutOrElse({
          duration: releaseTimeout,
          orElse: () => Effect.fail(new SandboxOperationFailed({ operation: "destroy_process", reason: "timed_out" }) as AnySandboxError),
        }),
        Effect.catch((e: AnySandboxError) => (gone(e) ? Effect.void : Effect.die(e))),
      ),
    { interruptible: true },
  );
}
