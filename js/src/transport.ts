// One WebSocket connection, over the `ws` package or a WHATWG WebSocket.

import { CLOSE_NORMAL, FIRST_SUBPROTOCOL_PREFIX, MAX_FIRST_SUBPROTOCOL, MAX_LINE, SUBPROTOCOL, SUBPROTOCOL_FIRST } from "./frames.js";
import { Failure, protocolError } from "./failure.js";

/**
 * A WebSocket class: `ws`'s (which can send headers and pings), or a
 * WHATWG one (globalThis.WebSocket of browsers, Deno, Bun, Node 22+).
 */
export type WebSocketClass = new (url: string, protocols?: string | string[], options?: unknown) => unknown;

/** Why a connection ended. */
export interface CloseInfo {
  /** The close code; 1006 when the connection was cut. */
  code: number;
  reason: string;
  /** A violation found by the WebSocket layer itself (a message over the limit). */
  error?: Error;
}

/** The operations the session needs from a connection. */
export interface Transport {
  /** The server took the first frame from the upgrade (PROTOCOL.md §1): it must not be sent. */
  firstSent?: boolean;
  /**
   * What arrived before the first handlers were set: the answer to a first
   * frame taken from the upgrade can come before the dial's caller runs.
   * Whoever sets onMessage and onClose first takes it (takeEarly).
   */
  early?: Early;
  send(text: string): void;
  /** Closes politely (code 1000). */
  close(): void;
  /** Drops the connection at once. */
  terminate(): void;
  /** Sends a ping; undefined when the implementation cannot. */
  ping?: () => void;
  onMessage: (line: Uint8Array) => void;
  onClose: (info: CloseInfo) => void;
  onPong: () => void;
}

interface WsLike {
  protocol: string;
  binaryType: string;
  on(ev: string, fn: (...args: any[]) => void): void;
  send(data: string): void;
  close(code?: number): void;
  terminate(): void;
  ping(): void;
}

interface WhatwgLike {
  protocol: string;
  binaryType: string;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  send(data: string): void;
  close(code?: number): void;
}

let wsModule: Promise<WebSocketClass> | undefined;

/**
 * Whether this is Node itself: Deno and Bun set process.versions.node too
 * (for compatibility), so they are told apart by their own marks
 * (globalThis.Deno, process.versions.bun / .deno); they, and browsers, use
 * their global WebSocket.
 */
export function isNode(): boolean {
  const g = globalThis as { Deno?: unknown; Bun?: unknown; process?: { versions?: Record<string, string | undefined> } };
  const v = g.process?.versions;
  return v?.node !== undefined && v.bun === undefined && v.deno === undefined && g.Deno === undefined && g.Bun === undefined;
}

/** The WebSocket class to use: the option, else `ws` on Node, else the global one. */
export async function webSocketClass(given?: WebSocketClass): Promise<WebSocketClass> {
  if (given) return given;
  if (isNode()) {
    wsModule ??= import("ws").then((m) => (m.WebSocket ?? m.default) as unknown as WebSocketClass);
    return wsModule;
  }
  const g = (globalThis as { WebSocket?: WebSocketClass }).WebSocket;
  if (!g) throw new TypeError("procwire: no WebSocket implementation: pass options.WebSocket");
  return g;
}

/** Whether C is `ws`'s class (it can send headers and pings). */
export function isWsClass(C: WebSocketClass): boolean {
  return typeof (C.prototype as { ping?: unknown }).ping === "function" && typeof (C.prototype as { on?: unknown }).on === "function";
}

const encoder = new TextEncoder();

/** The prefix of the subprotocol that carries a bearer token (PROTOCOL.md §1). */
export const BEARER_PREFIX = "procwire.bearer.";

/** The subprotocol carrying token: the prefix and its UTF-8 bytes in base64url without padding. */
export function bearerSubprotocol(token: string): string {
  const b = encoder.encode(token);
  let bin = "";
  for (let i = 0; i < b.length; i++) bin += String.fromCharCode(b[i]!);
  return BEARER_PREFIX + btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/**
 * The subprotocol carrying line, a connection's first message as it would
 * be sent (its JSON and its "\n"), in the upgrade (PROTOCOL.md §1); undefined
 * when it would be over MAX_FIRST_SUBPROTOCOL.
 */
export function firstSubprotocol(line: string): string | undefined {
  const b = encoder.encode(line);
  if (FIRST_SUBPROTOCOL_PREFIX.length + Math.ceil((b.length * 4) / 3) > MAX_FIRST_SUBPROTOCOL) return undefined;
  let bin = "";
  for (let i = 0; i < b.length; i++) bin += String.fromCharCode(b[i]!);
  return FIRST_SUBPROTOCOL_PREFIX + btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/**
 * Node's codes of a dial that failed before its request could be written
 * (nothing reached a server): such a failure with a first frame offered
 * started nothing.
 */
const NOT_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "ENOENT", "ERR_INVALID_URL"]);

/**
 * A first frame to offer in the upgrade (PROTOCOL.md §1): line is the
 * message as it would be sent. dial sets mayBeServed when it offered the
 * frame and the request may have reached a server, even if the dial then
 * failed: the frame may have been served (an open may have started its
 * process).
 */
export interface FirstOffer {
  line: string;
  mayBeServed?: boolean;
  /**
   * Set by dial when a hop refused the upgrade carrying the frame for its
   * size (HTTP 431, or 400 as nginx and HAProxy answer; dial then dialled
   * again without it), or when a WHATWG WebSocket's dial offering it failed
   * (a browser does not say why): later first frames go as messages.
   */
  refused?: boolean;
}

/**
 * Whether status, the answer to an upgrade that carried the first frame, is
 * how a hop refuses a request for its headers' size: 431 (Go's net/http and
 * so Caddy, Envoy) or 400 (nginx's "Request Header Or Cookie Too Large",
 * HAProxy). Any other answer stands.
 */
export function refusesFirst(status: number | undefined): boolean {
  return status === 431 || status === 400;
}

/** Whether hostname (a URL's) names the loopback interface. */
export function isLoopback(hostname: string): boolean {
  const h = hostname.toLowerCase().replace(/^\[|\]$/g, "");
  return h === "localhost" || h.endsWith(".localhost") || h === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/**
 * Dials url offering the procwire.v1 subprotocol (and any of extra, such
 * as the bearer one, which the server never selects). It resolves once the
 * connection is open, and rejects with a Failure when it cannot be
 * (unauthorized for a 401 or 403, connection_failed otherwise, timed_out
 * after timeoutMs), or with signal.reason when signal aborts.
 */
export function dial(C: WebSocketClass, url: string, headers: Record<string, string>, extra: string[], timeoutMs: number, signal?: AbortSignal, first?: FirstOffer): Promise<Transport> {
  const protocols = [SUBPROTOCOL, ...extra];
  const offered = first !== undefined ? firstSubprotocol(first.line) : undefined;
  if (offered) protocols.push(SUBPROTOCOL_FIRST, offered);
  const deadline = Date.now() + timeoutMs;
  return new Promise<Transport>((resolve, reject) => {
    let settled = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let abortSock = () => {};
    // fail rejects with err, or connection_failed; sent says whether the
    // request may have reached a server (undefined: it may have).
    const fail = (why: string, err?: unknown, sent?: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      abortSock();
      if (offered && sent !== false) first!.mayBeServed = true;
      reject(err ?? new Failure("connection_failed", `dial ${url}: ${why}`));
    };
    const onAbort = () => fail("aborted", signal!.reason);
    if (signal?.aborted) return fail("aborted", signal.reason, false);
    signal?.addEventListener("abort", onAbort);
    timer = setTimeout(() => fail("", new Failure("timed_out", `dial ${url}: no connection within ${timeoutMs} ms`)), timeoutMs);
    const opened = (t: Transport, protocol: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      t.firstSent = offered !== undefined && protocol.toLowerCase() === SUBPROTOCOL_FIRST;
      if (protocol !== SUBPROTOCOL && !t.firstSent) {
        t.terminate();
        if (offered) first!.mayBeServed = true;
        reject(new Failure("protocol_violation", `dial ${url}: server chose subprotocol ${JSON.stringify(protocol)}, want ${SUBPROTOCOL}`));
        return;
      }
      resolve(t);
    };
    try {
      if (isWsClass(C)) {
        // The decoder checks UTF-8 itself (strings are validated, and
        // nothing else but ASCII is valid outside them): ws need not.
        const sock = new C(url, protocols, { headers, maxPayload: MAX_LINE, perMessageDeflate: false, skipUTF8Validation: true }) as WsLike;
        abortSock = () => sock.terminate();
        sock.binaryType = "nodebuffer";
        const t = wsTransport(sock);
        sock.on("open", () => opened(t, sock.protocol));
        sock.on("unexpected-response", (_req: unknown, res: { statusCode?: number; statusMessage?: string; resume?: () => void }) => {
          res.resume?.();
          const why = `dial ${url}: HTTP ${res.statusCode} ${res.statusMessage ?? ""}`.trim();
          if (offered && refusesFirst(res.statusCode) && !settled) {
            // A hop refused the request for its size: nothing was served
            // (only a 101 serves a first frame). Dial again without it.
            settled = true;
            clearTimeout(timer);
            signal?.removeEventListener("abort", onAbort);
            abortSock();
            first!.refused = true;
            resolve(dial(C, url, headers, extra, Math.max(1, deadline - Date.now()), signal));
            return;
          }
          // Answered without an upgrade: nothing was served.
          fail(why, res.statusCode === 401 || res.statusCode === 403 ? new Failure("unauthorized", why) : undefined, false);
        });
        sock.on("error", (e: Error & { code?: string }) => fail(e.message, undefined, NOT_SENT.has(e.code ?? "") ? false : undefined));
        sock.on("close", (code: number) => fail(`closed with ${code} before the upgrade`));
      } else {
        if (Object.keys(headers).some((h) => h.toLowerCase() === "authorization")) {
          throw new TypeError("procwire: this WebSocket implementation cannot send the Authorization header: the token goes as a subprotocol");
        }
        const sock = new C(url, protocols) as WhatwgLike;
        abortSock = () => sock.close();
        sock.binaryType = "arraybuffer";
        const t = whatwgTransport(sock);
        sock.onopen = () => opened(t, sock.protocol);
        sock.onerror = () => {
          // A browser does not say why a dial failed: a hop may have
          // refused the request for its size. Later dials send it as a message.
          if (offered && !settled) first!.refused = true;
          fail("connection failed");
        };
        const onclose = sock.onclose;
        sock.onclose = (ev) => {
          if (!settled) fail(`closed with ${ev.code} before the upgrade`);
          else onclose?.(ev);
        };
      }
    } catch (e) {
      // The WebSocket constructor refused the URL or the subprotocols:
      // the caller's mistake.
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      reject(e instanceof TypeError ? e : new TypeError(`procwire: dial ${url}: ${(e as Error)?.message ?? e}`, { cause: e }));
    }
  });
}

/** Messages, and the close, that came before a transport had handlers. */
export interface Early {
  backlog: Uint8Array[];
  closed?: CloseInfo;
}

/** The handlers a transport starts with: they keep what comes in t.early. */
function keepEarly(t: Transport): void {
  const early: Early = { backlog: [] };
  t.early = early;
  t.onMessage = (l) => early.backlog.push(l);
  t.onClose = (i) => {
    early.closed = i;
  };
}

/**
 * takeEarly hands what came before t had handlers to the handlers just set,
 * in order: each message to the onMessage of the moment, then the close.
 */
export function takeEarly(t: Transport): void {
  const early = t.early;
  if (!early) return;
  t.early = undefined;
  for (const l of early.backlog) t.onMessage(l);
  if (early.closed) t.onClose(early.closed);
}

function wsTransport(sock: WsLike): Transport {
  let error: Error | undefined;
  const t: Transport = {
    send: (s) => sock.send(s),
    close: () => sock.close(CLOSE_NORMAL),
    terminate: () => sock.terminate(),
    ping: () => sock.ping(),
    onMessage: () => {},
    onClose: () => {},
    onPong: () => {},
  };
  keepEarly(t);
  sock.on("message", (data: Uint8Array | ArrayBuffer | Uint8Array[], isBinary: boolean) => {
    if (isBinary) {
      error ??= protocolError("", "a binary message");
      sock.terminate();
      return;
    }
    t.onMessage(Array.isArray(data) ? Buffer.concat(data) : data instanceof ArrayBuffer ? new Uint8Array(data) : data);
  });
  sock.on("error", (e: Error & { code?: string }) => {
    if (e.code === "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH") {
      error ??= protocolError("", `line_too_long: a message over ${MAX_LINE} bytes`);
    }
  });
  sock.on("pong", () => t.onPong());
  sock.on("close", (code: number, reason: Uint8Array) => {
    t.onClose({ code, reason: Buffer.from(reason).toString("utf8"), error });
  });
  return t;
}

function whatwgTransport(sock: WhatwgLike): Transport {
  let error: Error | undefined;
  let closed = false;
  // A WHATWG close() waits for the peer's close frame, which a dead link
  // never sends: terminate reports the end at once and ignores the rest.
  const terminate = () => {
    if (closed) return;
    closed = true;
    sock.onmessage = null;
    sock.onclose = null;
    try {
      sock.close();
    } catch {
      // already closing
    }
    queueMicrotask(() => t.onClose({ code: 1006, reason: "terminated by the client", error }));
  };
  const t: Transport = {
    send: (s) => sock.send(s),
    close: () => sock.close(CLOSE_NORMAL),
    terminate,
    onMessage: () => {},
    onClose: () => {},
    onPong: () => {},
  };
  keepEarly(t);
  sock.onmessage = (ev) => {
    if (typeof ev.data !== "string") {
      error ??= protocolError("", "a binary message");
      terminate();
      return;
    }
    t.onMessage(encoder.encode(ev.data));
  };
  sock.onclose = (ev) => {
    if (closed) return;
    closed = true;
    t.onClose({ code: ev.code, reason: ev.reason, error });
  };
  return t;
}
