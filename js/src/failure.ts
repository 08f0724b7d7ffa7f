// Failure: how the client carries a transport condition internally until a
// caller's operation meets it; surface turns it into that operation's
// adapter error. Never seen by callers.

import { DecodeError } from "./frames.js";
import { SandboxError, contractError, type Condition } from "./errors.js";

/** A transport condition met by the client, not yet tied to an operation. */
export class Failure extends Error {
  constructor(
    readonly condition: Condition,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** A protocol_violation naming the field. */
export function protocolError(field: string, detail: string, cause?: unknown): Failure {
  return new Failure("protocol_violation", `${field ? field + ": " : ""}${detail}`, { cause });
}

/**
 * The error a caller of operation sees for e: adapter errors as they are,
 * a Failure or a DecodeError as the operation's adapter error, misuse
 * (TypeError, RangeError) as it is; anything else is the connection lost.
 */
export function surface(e: unknown, operation: string): Error {
  if (e instanceof SandboxError || e instanceof TypeError || e instanceof RangeError) return e;
  if (e instanceof Failure) {
    return contractError(e.condition, operation, { message: `procwire: ${operation}: ${e.condition}${e.message ? ": " + e.message : ""}`, cause: e.cause });
  }
  if (e instanceof DecodeError) return contractError("protocol_violation", operation, { message: `procwire: ${operation}: protocol_violation: ${e.message}`, cause: e });
  return contractError("connection_lost", operation, { message: `procwire: ${operation}: connection_lost: ${(e as Error)?.message ?? String(e)}`, cause: e });
}
