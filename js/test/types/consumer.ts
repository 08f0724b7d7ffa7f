// Compiled (never run) by npm test: the published declarations used the
// way the README does, under strict settings.
import {
  openProcess,
  SandboxError,
  SandboxLifecycleConflict,
  SandboxOperationFailed,
  type Exit,
  type ProcessHandle,
  type OpenOptions,
} from "../../dist/index.js";

export async function pipeline(url: string, token: string): Promise<Exit> {
  const options: OpenOptions = { token, tokenVia: "subprotocol", stdoutWindow: 1 << 20, destroyTimeout: 5_000, signalTimeout: 2_000, limits: { memory: 256 << 20 }, signal: AbortSignal.timeout(10_000) };
  const p: ProcessHandle = await openProcess(url, "instance-1", {
    executable: "tr",
    arguments: ["a-z", "A-Z"],
    working_directory: "/tmp",
    environment: { PATH: "/usr/bin:/bin" },
  }, options);
  try {
    await Promise.all([
      new Blob(["hello\n"]).stream().pipeTo(p.input),
      p.output.pipeThrough(new TextDecoderStream()).pipeTo(new WritableStream<string>({ write: (s) => console.log(s) })),
    ]);
    const exit = await p.wait({ signal: AbortSignal.timeout(60_000) });
    const byob = p.output.getReader({ mode: "byob" });
    const chunk: ReadableStreamReadResult<Uint8Array<ArrayBuffer>> = await byob.read(new Uint8Array(4096));
    if (!chunk.done) console.log(chunk.value.byteLength);
    byob.releaseLock();
    if (exit.signal !== undefined) console.log("killed by", exit.signal, exit.reason satisfies string | undefined);
    else console.log("exit code", exit.code satisfies number);
    const delivered: boolean = await p.signal("SIGTERM");
    console.log(delivered, p.errorDropped(), p.evidence.started_at, p.progress().stdoutRead, p.evidence.limits?.memory);
    return exit;
  } catch (e) {
    if (e instanceof SandboxLifecycleConflict) console.log(e.operation, e.actual satisfies string, e.expected);
    else if (e instanceof SandboxOperationFailed) console.log(e._tag satisfies "SandboxOperationFailed", e.operation satisfies string, e.reason satisfies string);
    else if (e instanceof SandboxError) console.log(e._tag, e.reason, e.gap?.oldest);
    throw e;
  } finally {
    await p.destroy({ signal: AbortSignal.timeout(30_000) });
  }
}
