// The errors a caller can see: the sandbox provider contract's adapter
// errors, each with a `_tag` equal to its contract name and its fields as
// plain own data properties (a field not set is absent). Misuse by the
// caller is a TypeError or RangeError instead, and an operation the caller
// aborted rejects with the caller's own `signal.reason`.

import type { ErrorFrame, Gap } from "./frames.js";

/** The contract's names of the adapter errors. */
export type SandboxErrorTag =
  | "SandboxOperationFailed"
  | "SandboxLifecycleConflict"
  | "SandboxCapabilityUnavailable"
  | "SandboxInstanceNotFound"
  | "SandboxFileTooLarge"
  | "SandboxOutputLimitExceeded"
  | "SandboxSnapshotForbidden"
  | "SandboxSnapshotNotFound";

/** The fields any adapter error may carry; each one not given stays absent. */
export interface SandboxErrorFields {
  /** The contract operation, e.g. "open_process", "wait_process". */
  operation?: string;
  /** Why the operation failed (SandboxOperationFailed), e.g. "connection_lost". */
  reason?: string;
  /** The lifecycle state the operation needed (SandboxLifecycleConflict). */
  expected?: string;
  /** The lifecycle state it met (SandboxLifecycleConflict). */
  actual?: string;
  /** The missing capability (SandboxCapabilityUnavailable). */
  requirement?: string;
  /** With reason replay_gap: the offset asked for and the oldest held. */
  gap?: Gap;
  /** The server's human-readable message; never parsed. */
  serverMessage?: string;
  /** The server's error frame, when the error came from one. */
  frame?: ErrorFrame;
  /** The message; default one built from the tag and the fields. */
  message?: string;
  /** What led to it (a DecodeError, the transport's error...). */
  cause?: unknown;
}

const FIELDS = ["operation", "reason", "expected", "actual", "requirement", "gap", "serverMessage", "frame"] as const;

/**
 * The base of every adapter error. `_tag` names the contract error (an own
 * enumerable property, so Effect's `catchTag` finds it); the fields are own
 * data properties, absent when not set.
 */
export abstract class SandboxError extends Error {
  declare readonly _tag: SandboxErrorTag;
  declare readonly operation?: string;
  declare readonly reason?: string;
  declare readonly expected?: string;
  declare readonly actual?: string;
  declare readonly requirement?: string;
  declare readonly gap?: Gap;
  declare readonly serverMessage?: string;
  declare readonly frame?: ErrorFrame;

  protected constructor(tag: SandboxErrorTag, fields: SandboxErrorFields) {
    super(fields.message ?? describe(tag, fields), fields.cause !== undefined ? { cause: fields.cause } : undefined);
    Object.defineProperty(this, "name", { value: tag, enumerable: false, writable: true, configurable: true });
    Object.defineProperty(this, "_tag", { value: tag, enumerable: true, writable: false, configurable: true });
    const self = this as unknown as Record<string, unknown>;
    for (const k of FIELDS) {
      if (fields[k] !== undefined) self[k] = fields[k];
    }
  }
}

function describe(tag: string, f: SandboxErrorFields): string {
  let m = "procwire: " + tag;
  for (const k of ["operation", "reason", "expected", "actual", "requirement"] as const) {
    if (f[k] !== undefined) m += ` ${k}=${JSON.stringify(f[k])}`;
  }
  if (f.gap) m += ` gap={requested ${f.gap.requested}, oldest ${f.gap.oldest}}`;
  if (f.serverMessage !== undefined) m += `: ${f.serverMessage}`;
  return m;
}

type Extra = Omit<SandboxErrorFields, "operation" | "reason" | "expected" | "actual" | "requirement">;

/** The operation was attempted and failed; `reason` says why. */
export class SandboxOperationFailed extends SandboxError {
  declare readonly _tag: "SandboxOperationFailed";
  declare readonly operation: string;
  declare readonly reason: string;
  constructor(fields: { operation: string; reason: string } & Extra) {
    super("SandboxOperationFailed", fields);
  }
}

/** The operation conflicts with the process's lifecycle state. */
export class SandboxLifecycleConflict extends SandboxError {
  declare readonly _tag: "SandboxLifecycleConflict";
  declare readonly operation: string;
  declare readonly actual: string;
  constructor(fields: { operation: string; expected?: string; actual: string } & Extra) {
    super("SandboxLifecycleConflict", fields);
  }
}

/** The provider lacks a capability; `requirement` names it. */
export class SandboxCapabilityUnavailable extends SandboxError {
  declare readonly _tag: "SandboxCapabilityUnavailable";
  declare readonly requirement: string;
  constructor(fields: { requirement: string; operation?: string } & Extra) {
    super("SandboxCapabilityUnavailable", fields);
  }
}

/** The fields of the errors that require none. */
export type PlainFields = SandboxErrorFields;

/** The instance is unknown to the provider. */
export class SandboxInstanceNotFound extends SandboxError {
  declare readonly _tag: "SandboxInstanceNotFound";
  constructor(fields: PlainFields = {}) {
    super("SandboxInstanceNotFound", fields);
  }
}
/** A file over the provider's bound. */
export class SandboxFileTooLarge extends SandboxError {
  declare readonly _tag: "SandboxFileTooLarge";
  constructor(fields: PlainFields = {}) {
    super("SandboxFileTooLarge", fields);
  }
}
/** Output over the provider's bound. */
export class SandboxOutputLimitExceeded extends SandboxError {
  declare readonly _tag: "SandboxOutputLimitExceeded";
  constructor(fields: PlainFields = {}) {
    super("SandboxOutputLimitExceeded", fields);
  }
}
/** A snapshot operation the provider forbids. */
export class SandboxSnapshotForbidden extends SandboxError {
  declare readonly _tag: "SandboxSnapshotForbidden";
  constructor(fields: PlainFields = {}) {
    super("SandboxSnapshotForbidden", fields);
  }
}
/** An unknown snapshot. */
export class SandboxSnapshotNotFound extends SandboxError {
  declare readonly _tag: "SandboxSnapshotNotFound";
  constructor(fields: PlainFields = {}) {
    super("SandboxSnapshotNotFound", fields);
  }
}

/** Every adapter error. */
export type AnySandboxError =
  | SandboxOperationFailed
  | SandboxLifecycleConflict
  | SandboxCapabilityUnavailable
  | SandboxInstanceNotFound
  | SandboxFileTooLarge
  | SandboxOutputLimitExceeded
  | SandboxSnapshotForbidden
  | SandboxSnapshotNotFound;

/**
 * The typed error for a server's error frame. A code outside the closed
 * vocabulary (the decoder refuses one already) is the server breaking the
 * wire: SandboxOperationFailed with reason protocol_violation, for
 * `operation` (the frame's own when it names one).
 */
export function sandboxError(frame: ErrorFrame, operation = "open_process"): SandboxError {
  const fields: SandboxErrorFields = {
    operation: frame.operation,
    reason: frame.reason,
    expected: frame.expected,
    actual: frame.actual,
    requirement: frame.requirement,
    gap: frame.gap,
    serverMessage: frame.message,
    frame,
  };
  const op = frame.operation ?? operation;
  switch (frame.code) {
    case "SandboxOperationFailed":
      return new SandboxOperationFailed({ ...fields, operation: op, reason: frame.reason ?? "" });
    case "SandboxLifecycleConflict":
      return new SandboxLifecycleConflict({ ...fields, operation: op, actual: frame.actual ?? "" });
    case "SandboxCapabilityUnavailable":
      return new SandboxCapabilityUnavailable({ ...fields, requirement: frame.requirement ?? "" });
    case "SandboxInstanceNotFound":
      return new SandboxInstanceNotFound(fields);
    case "SandboxFileTooLarge":
      return new SandboxFileTooLarge(fields);
    case "SandboxOutputLimitExceeded":
      return new SandboxOutputLimitExceeded(fields);
    case "SandboxSnapshotForbidden":
      return new SandboxSnapshotForbidden(fields);
    case "SandboxSnapshotNotFound":
      return new SandboxSnapshotNotFound(fields);
  }
  return new SandboxOperationFailed({
    operation: op,
    reason: "protocol_violation",
    frame,
    message: `procwire: ${op}: protocol_violation: error code ${JSON.stringify(frame.code)} outside the contract's vocabulary`,
  });
}

/**
 * The transport conditions the client turns into adapter errors (the
 * shared table frames/testdata/client-errors.json, which the Go client
 * maps identically).
 */
export type Condition =
  | "connection_lost"
  | "resumed_elsewhere"
  | "timed_out"
  | "protocol_violation"
  | "evidence_mismatch"
  | "connection_failed"
  | "unauthorized"
  | "server_shutdown"
  | "destroyed"
  | "expired"
  | "stdin_closed";

const FAILED: ReadonlySet<string> = new Set([
  "connection_lost",
  "resumed_elsewhere",
  "timed_out",
  "protocol_violation",
  "connection_failed",
  "unauthorized",
  "server_shutdown",
]);

/**
 * The adapter error for a transport condition met during operation:
 * SandboxOperationFailed{operation, reason: condition} for a failure
 * (evidence_mismatch names operation "open_process_identity"), and
 * SandboxLifecycleConflict for destroyed, expired and stdin_closed. An
 * unknown condition is a RangeError.
 */
export function contractError(condition: string, operation: string, options: { cause?: unknown; message?: string } = {}): SandboxError {
  const { cause, message } = options;
  const msg = (op: string, what: string) => message ?? `procwire: ${op}: ${what}`;
  if (FAILED.has(condition)) {
    return new SandboxOperationFailed({ operation, reason: condition, cause, message: msg(operation, condition) });
  }
  switch (condition) {
    case "evidence_mismatch":
      return new SandboxOperationFailed({ operation: "open_process_identity", reason: condition, cause, message: msg("open_process_identity", condition) });
    case "destroyed":
      return new SandboxLifecycleConflict({ operation, expected: "running", actual: "process_destroyed", cause, message: msg(operation, "process destroyed") });
    case "expired":
      return new SandboxLifecycleConflict({ operation, expected: "running", actual: "process_expired", cause, message: msg(operation, "process expired") });
    case "stdin_closed":
      return new SandboxLifecycleConflict({ operation, expected: "stdin_open", actual: "stdin_closed", cause, message: msg(operation, "stdin closed") });
  }
  throw new RangeError(`procwire: unknown condition ${JSON.stringify(condition)}`);
}
