// Typed errors mirroring the sandbox provider contract's vocabulary.

import type { ErrorFrame, Gap } from "./frames.js";

/** The base of every error the client raises. */
export class ProcwireError extends Error {
  override name = "ProcwireError";
}

/**
 * An error frame from the server, with its fields. The subclass names the
 * code; `code` holds it too.
 */
export class SandboxError extends ProcwireError {
  override name = "SandboxError";
  /** The contract's error code, e.g. "SandboxLifecycleConflict". */
  readonly code: string;
  readonly operation?: string;
  readonly expected?: string;
  readonly actual?: string;
  readonly requirement?: string;
  readonly reason?: string;
  /** The server's human-readable message; never parsed. */
  readonly serverMessage?: string;
  /** With reason replay_gap: the offset asked for and the oldest held. */
  readonly gap?: Gap;
  /** The frame as received. */
  readonly frame: ErrorFrame;

  constructor(frame: ErrorFrame) {
    let m = "procwire: " + frame.code;
    for (const k of ["operation", "expected", "actual", "requirement", "reason", "message"] as const) {
      if (frame[k] !== undefined) m += ` ${k}=${JSON.stringify(frame[k])}`;
    }
    if (frame.gap) m += ` gap={requested ${frame.gap.requested}, oldest ${frame.gap.oldest}}`;
    super(m);
    this.frame = frame;
    this.code = frame.code;
    this.operation = frame.operation;
    this.expected = frame.expected;
    this.actual = frame.actual;
    this.requirement = frame.requirement;
    this.reason = frame.reason;
    this.serverMessage = frame.message;
    this.gap = frame.gap;
  }
}

/** The operation conflicts with the process's lifecycle state. */
export class SandboxLifecycleConflict extends SandboxError {
  override name = "SandboxLifecycleConflict";
}
/** The operation was attempted and failed; `reason` says why. */
export class SandboxOperationFailed extends SandboxError {
  override name = "SandboxOperationFailed";
}
/** The provider lacks a capability; `requirement` names it. */
export class SandboxCapabilityUnavailable extends SandboxError {
  override name = "SandboxCapabilityUnavailable";
}
/** The instance is unknown to the provider. */
export class SandboxInstanceNotFound extends SandboxError {
  override name = "SandboxInstanceNotFound";
}
/** A file over the provider's bound. */
export class SandboxFileTooLarge extends SandboxError {
  override name = "SandboxFileTooLarge";
}
/** Output over the provider's bound. */
export class SandboxOutputLimitExceeded extends SandboxError {
  override name = "SandboxOutputLimitExceeded";
}
/** A snapshot operation the provider forbids. */
export class SandboxSnapshotForbidden extends SandboxError {
  override name = "SandboxSnapshotForbidden";
}
/** An unknown snapshot. */
export class SandboxSnapshotNotFound extends SandboxError {
  override name = "SandboxSnapshotNotFound";
}

const byCode: Record<string, new (f: ErrorFrame) => SandboxError> = {
  SandboxLifecycleConflict,
  SandboxOperationFailed,
  SandboxCapabilityUnavailable,
  SandboxInstanceNotFound,
  SandboxFileTooLarge,
  SandboxOutputLimitExceeded,
  SandboxSnapshotForbidden,
  SandboxSnapshotNotFound,
};

/** The typed error for an error frame. */
export function sandboxError(frame: ErrorFrame): SandboxError {
  const C = Object.hasOwn(byCode, frame.code) ? byCode[frame.code]! : SandboxError;
  return new C(frame);
}

/**
 * The server broke PROTOCOL.md, or its evidence does not match the request
 * (operation "open_process_identity", field naming the first difference).
 * The client destroys the process after it.
 */
export class SandboxProtocolInvalid extends ProcwireError {
  override name = "SandboxProtocolInvalid";
  readonly code = "SandboxProtocolInvalid";
  /** For a frame that does not decode, `cause` is the DecodeError. */
  constructor(
    readonly operation: string,
    readonly field: string,
    readonly detail: string,
    options?: { cause?: unknown },
  ) {
    super(`procwire: SandboxProtocolInvalid: ${operation}${field ? ": " + field : ""}${detail ? ": " + detail : ""}`, options);
  }
}

/**
 * The connection was lost and could not be resumed: the grace ran out, the
 * server refused the connection, or the process was resumed elsewhere.
 */
export class ConnectionLost extends ProcwireError {
  override name = "ConnectionLost";
}

/** The process was destroyed (by destroy() or input.abort()). */
export class Destroyed extends ProcwireError {
  override name = "Destroyed";
  constructor(message = "procwire: process destroyed") {
    super(message);
  }
}

/** protocolError is a SandboxProtocolInvalid of the session. */
export function protocolError(field: string, detail: string): SandboxProtocolInvalid {
  return new SandboxProtocolInvalid("open_process", field, detail);
}

/** Whether err says the process is gone on the server, so there is nothing to destroy. */
export function processGone(err: unknown): boolean {
  if (err instanceof Destroyed) return true;
  if (!(err instanceof SandboxError)) return false;
  if (err.actual === "process_not_found" || err.actual === "process_destroyed" || err.actual === "process_expired") return true;
  return err.reason === "server_shutdown";
}
