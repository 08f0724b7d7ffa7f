// @procwire/client: one remote process's stdio as Web Streams over procwire.v1.
export * from "./frames.js";
export * from "./errors.js";
export { openProcess } from "./client.js";
export type { OpenOptions, TtyOptions, ProcessHandle, Exit, SignalName, Progress, Bytes } from "./client.js";
export type { WebSocketClass } from "./transport.js";
